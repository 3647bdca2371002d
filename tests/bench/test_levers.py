"""bench/levers.py and its drafting and sampled-generation parts on the tiny generated model: each
part runs and reports its figures from real replies (the figures themselves are the lead's to
measure on the starter; nothing here asserts a speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

sys.path.insert(0, str(REPO_ROOT / "bench"))

import levers_lookup  # noqa: E402
import levers_sampled  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def sure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("m") / "sure.gguf", logit_scale=60.0, n_ctx_train=4096)


def test_the_lookup_part_runs_every_task_both_ways(sure: Path) -> None:
    result = levers_lookup.run(str(sure), rounds=2)
    assert set(result["tasks"]) == {"copy", *levers_lookup.OPEN_ENDED}
    for task in result["tasks"].values():
        assert len(task["runs_off"]) == len(task["runs_auto"]) == 2
        assert task["tg_off"] > 0 and task["tg_auto"] > 0
        assert task["ratio"] == round(task["tg_auto"] / task["tg_off"], 3)
        assert 0 <= task["accepted"] <= task["drafted"]
        assert all(task["same_text"])  # greedy on a model this sure of itself: drafting changes nothing
    assert isinstance(result["meets_copy"], bool) and isinstance(result["meets_open"], bool)


@pytest.mark.slow_build
def test_the_sampled_part_compares_with_llama_server_and_llama_bench(sure: Path) -> None:
    result = levers_sampled.run(str(sure), rounds=1, tokens=24, threads=1)
    assert set(result["runs"]) == {"cove", "llama_server", "llama_bench"}
    assert all(len(v) == 1 and v[0] > 0 for v in result["runs"].values())
    assert result["ratio_server"] == round(result["tg"]["cove"] / result["tg"]["llama_server"], 3)


def test_levers_refuses_an_unknown_part_with_a_sentence(sure: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "levers.py"), "--model", str(sure), "--parts", "lookup,warp"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "unknown part 'warp'" in done.stderr and "Traceback" not in done.stderr


def test_levers_runs_a_part_and_prints_json(sure: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "levers.py"), "--model", str(sure), "--parts", "lookup", "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["lookup"]["rounds"] == 1 and "copy" in result["lookup"]["tasks"]
