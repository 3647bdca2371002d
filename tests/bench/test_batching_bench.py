"""bench/batching.py runs end to end on the tiny generated model: concurrent streaming clients
against `cove serve` (and against llama-server where the suite has built it), every stream
generating exactly the tokens asked for, and the JSON holding each figure. Nothing here asserts a
speed: the figures are the lead's to measure on the starter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(400)

# Long enough that each stream comes in several chunks: Cove sends a reply's first chunk once the
# request is committed, and on a busy disk the tiny model (about 1.5 ms a token) could finish 48
# tokens before that, leaving one chunk and no per-stream rate to measure.
GEN = 160
FIGURES = {
    "aggregate_tps",
    "per_stream_tps",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "engine_rss_mib",
    "min_tokens",
    "prompt_tokens",
    "errors",
    "runs",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("m") / "tiny.gguf")


def run_bench(model: Path, systems: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "batching.py"),
            "--model",
            str(model),
            "--clients",
            "1,2",
            "--runs",
            "1",
            "--gen",
            str(GEN),
            "--prompt-tokens",
            "24",
            "--systems",
            systems,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=360,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def check_row(row: dict[str, Any], system: str, n: int) -> None:
    figures = row[system]
    assert set(figures) >= FIGURES, figures.keys()
    assert figures["errors"] == [], figures["errors"]
    assert figures["min_tokens"] == GEN  # end-of-generation ignored: every stream runs to the end
    assert figures["aggregate_tps"] > 0
    assert figures["per_stream_tps"] is not None and figures["per_stream_tps"] > 0
    assert 0 < figures["ttft_p50_ms"] <= figures["ttft_p99_ms"]
    assert figures["engine_rss_mib"] > 0 and figures["prompt_tokens"] >= 24
    assert len(figures["runs"]) == 1 and len(figures["runs"][0]["tokens"]) == n


def test_cove_and_its_one_slot_baseline_run_end_to_end(tiny: Path) -> None:
    result = run_bench(tiny, "cove,cove-1")
    assert result["systems"] == ["cove", "cove-1"] and result["clients"] == [1, 2]
    assert result["ctx_per_slot"] == 512  # the tiny model's training context, as Cove loads it
    for n in (1, 2):
        row = result["by_n"][str(n)]
        for system in ("cove", "cove-1"):
            check_row(row, system, n)
        assert row["ratios"]["cove/cove-1"] == round(row["cove"]["aggregate_tps"] / row["cove-1"]["aggregate_tps"], 3)


@pytest.mark.slow_build
def test_llama_server_runs_beside_cove_when_built(tiny: Path) -> None:
    from app.speed.llama_tools import is_built
    from tests.support.llama_server import tools_cache

    if not is_built(tools_cache()):
        pytest.skip("llama.cpp's tools are not built here (the suite builds them; tests/support/llama_tools_build.py)")
    result = run_bench(tiny, "cove,llama-server")
    for n in (1, 2):
        row = result["by_n"][str(n)]
        check_row(row, "cove", n)
        check_row(row, "llama-server", n)
        assert row["ratios"]["cove/llama-server"] > 0


def test_an_unknown_system_is_refused_with_a_sentence(tiny: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "batching.py"), "--model", str(tiny), "--systems", "cove,ollama"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2
    assert "unknown systems: ollama" in done.stderr and "Traceback" not in done.stderr
