"""bench/levers.py in its short form (--quick: one round of each part at small sizes) on the tiny
generated model, run as a person runs it: every part exits cleanly and prints its figures. The
figures are only checked to be present and sane; the speed goals are the lead's to measure on the
starter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

sys.path.insert(0, str(REPO_ROOT / "bench"))

import levers  # noqa: E402

pytestmark = pytest.mark.timeout(300)

LEVERS = REPO_ROOT / "bench" / "levers.py"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A chat template (the reopen part's conversation), 32-wide heads (the kv part's q8_0 K cache),
    # a context of 8192 (the kv and reopen parts ask for it) and sure picks (the lookup part drafts).
    return write_tiny_gguf(
        tmp_path_factory.mktemp("m") / "levers.gguf",
        chat_template=CHATML_TEMPLATE,
        extra_tokens=CHATML_TOKENS,
        n_head=2,
        n_ctx_train=8192,
        logit_scale=60.0,
    )


def _levers(model: Path, parts: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LEVERS), "--model", str(model), "--parts", parts, "--quick", *extra],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=REPO_ROOT,
    )


def test_the_short_form_runs_reopen_lookup_and_kv_and_reports_their_figures(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    done = _levers(model, "reopen,lookup,kv", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["rounds"] == 1 and result["model"] == model.name

    reopen = result["reopen"]
    assert reopen["rounds"] == 1 and reopen["conversation_tokens"] >= 600 and reopen["state_file_bytes"] > 0
    assert reopen["all_disk_hits"] and reopen["discarded"] is None
    assert reopen["saved"]["cached_tokens"] > 0 and reopen["recompute"]["cached_tokens"] == 0
    assert reopen["saved"]["wall_ttft_ms"] > 0 and reopen["recompute"]["wall_ttft_ms"] > 0
    assert reopen["ratio_wall_ttft"] > 0 and isinstance(reopen["meets_goal"], bool)

    lookup = result["lookup"]
    copy = lookup["tasks"]["copy"]
    assert lookup["rounds"] == 1 and copy["tg_off"] > 0 and copy["tg_auto"] > 0 and copy["ratio"] > 0
    assert 0 <= copy["accepted"] <= copy["drafted"]
    assert isinstance(lookup["meets_copy"], bool)

    kv = result["kv"]
    assert kv["quick"] and kv["rounds"] == 1
    for kv_type in ("f16", "q8_0"):
        t = kv["types"][kv_type]
        assert all(v > 0 for v in t["pp_samples"] + t["tg_samples"])
    assert 0 < kv["q8_0_over_f16"]["kv_bytes"] < 1

    assert all(result[part]["seconds"] > 0 for part in ("reopen", "lookup", "kv"))
    seconds = time.perf_counter() - t0

    levers.print_all(result)  # what the bench prints without --json, from the same figures
    out = capsys.readouterr().out
    assert "Reopen a " in out and "goal <= 0.15" in out and "not restored" not in out
    assert "copy" in out and "goals: copy >= 1.3x" in out and "q8_0" in out
    print(f"levers --quick (reopen, lookup, kv) on the tiny model: {seconds:.1f} s")


@pytest.mark.slow_build
def test_the_short_form_runs_the_sampled_part(model: Path) -> None:
    done = _levers(model, "sampled", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    sampled = json.loads(done.stdout)["sampled"]
    assert all(len(v) == 1 and v[0] > 0 for v in sampled["runs"].values())
    assert sampled["ratio_server"] > 0
