"""bench/vision.py runs end to end on the tiny vision pair: image tokens and encode times at both
sizes from Cove and from llama-mtmd-cli (built with llama.cpp's other tools), and the ratio made of
them. Nothing here asserts a speed: the figures are the lead's to measure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_vision import N_IMAGE_TOKENS

pytestmark = pytest.mark.timeout(600)


@pytest.mark.slow_build
def test_the_vision_bench_measures_both_programs_on_the_tiny_pair() -> None:
    from app.speed.llama_tools import is_built
    from tests.support.llama_server import tools_cache

    if not is_built(tools_cache()):
        pytest.skip("llama.cpp's tools are not built here (the suite builds them; tests/support/llama_tools_build.py)")
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "vision.py"), "--runs", "1", "--threads", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert set(report["sizes"]) == {"320x240", "1280x960"} and report["text_ttft_ms"] > 0
    for row in report["sizes"].values():
        assert row["image_tokens"] == N_IMAGE_TOKENS
        assert row["cove_encode_ms"] > 0 and row["mtmd_cli_encode_ms"] > 0
        assert row["speed_vs_mtmd_cli"] == round(row["mtmd_cli_encode_ms"] / row["cove_encode_ms"], 3)
        assert row["ttft_ms"] > 0


def test_a_model_without_its_projector_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "vision.py"), "--model", "x.gguf"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "--model and --mmproj go together" in done.stderr
