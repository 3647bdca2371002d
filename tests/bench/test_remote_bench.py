"""bench/remote.py runs end to end on the tiny generated model: the cove serve case on loopback and
the paired case, where a second Cove pairs three times with `cove serve --host 127.0.0.2` (HTTPS)
and chats through the first connection, its certificate pinned and its key in that Cove's
keyring. The JSON holds every figure and the text names them. Nothing here asserts a speed: the
figures are the lead's to measure on the starter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(300)

FIGURES = {
    "kind",
    "tg_ratio",
    "tg_ratio_full_replies",
    "full_replies",
    "ttft_over_ms_p50",
    "raw_ttft_over_ms_p50",
    "cove_tg_tps",
    "server_tg_tps",
    "rounds",
}


def check_case(case: dict[str, Any]) -> None:
    assert set(case) >= FIGURES, case.keys()
    assert case["kind"] == "cove"
    assert case["tg_ratio"] > 0 and case["cove_tg_tps"] > 0 and case["server_tg_tps"] > 0
    assert isinstance(case["ttft_over_ms_p50"], float) and isinstance(case["raw_ttft_over_ms_p50"], float)
    assert len(case["rounds"]) == 1
    (reply,) = case["rounds"][0]["replies"]
    assert reply["gen_tokens"] > 1 and reply["server_first_ms"] > 0


def test_the_remote_bench_measures_a_paired_cove_over_tls(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "remote.py"),
            "--model",
            str(tiny),
            "--cases",
            "cove-serve,paired",
            "--rounds",
            "1",
            "--requests",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert "llama_server" not in result
    check_case(result["cove_serve"])
    paired = result["paired"]
    check_case(paired)
    assert paired["url"].startswith("https://127.0.0.2:") and paired["tls"] is True and paired["pinned"] is True
    assert paired["goals"]["ttft_over_ms_p50"] == 15.0
    # Three codes, three pairings under three names, each with a key of its own on the serving Cove.
    assert [p["name"] for p in paired["pairings"]] == ["bench-1", "bench-2", "bench-3"]
    assert len({p["key_name"] for p in paired["pairings"]}) == 3
    assert all(p["pair_ms"] > 0 and p["list_models_ms"] > 0 and p["models"] == ["tiny"] for p in paired["pairings"])
    assert paired["pair_ms"] in {p["pair_ms"] for p in paired["pairings"]}  # the median of three
    assert "app.remote.pairing.pair" in paired["pairing_timed"]

    from bench.remote import describe

    text = describe(result)
    assert "cove serve (probed as cove)" in text and "paired Cove over TLS (probed as cove)" in text
    assert "time to pair:" in text and "median of 3" in text
