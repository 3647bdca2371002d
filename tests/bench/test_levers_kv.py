"""bench/levers_kv.py on the real engine with the tiny generated model (32-wide heads, so a
q8_0 K cache fits its blocks): one quick round measures both cache types, llama.cpp's KV buffers
match the estimate's within 10%, q8_0 takes about half of f16's, and every speed is a positive
rate of the sizes it says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

sys.path.insert(0, str(REPO_ROOT / "bench"))

import levers_kv  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def test_a_quick_round_measures_both_types_against_the_estimate(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny-kv.gguf", n_head=2, n_ctx_train=levers_kv.N_CTX)
    result = levers_kv.run(str(model), rounds=2, quick=True)
    assert (result["n_ctx"], result["n_prompt"], result["n_gen"], result["rounds"]) == (8192, 256, 16, 2)
    for kv_type in ("f16", "q8_0"):
        t = result["types"][kv_type]
        assert 0.9 <= t["kv_measured_over_estimate"] <= 1.1, t
        assert len(t["pp_samples"]) == len(t["tg_samples"]) == 2 and all(v > 0 for v in t["pp_samples"] + t["tg_samples"])
        assert t["engine_uss"] is None or t["engine_uss"] > 0
        assert t["estimate_total_ram"] > t["estimate_loaded_ram"] > t["kv_estimate"]
    assert 0.50 <= result["q8_0_over_f16"]["kv_bytes"] <= 0.56
