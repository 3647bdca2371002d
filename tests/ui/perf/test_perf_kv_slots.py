"""The performance panel's KV line sets llama.cpp's figure beside the estimate for as many slots as
the engine holds (each has its own KV cache), not for one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from ui.perf.kv_figures import LoadedKV, estimated_kv_bytes


def test_the_kv_estimate_counts_every_slot(tiny_gguf: Path) -> None:
    loaded = SimpleNamespace(
        path=str(tiny_gguf), n_ctx=512, n_gpu_layers=0, type_k="f16", type_v="f16", kv_bytes=0, flash_attn="auto", draft_model="", slots=4
    )
    four = LoadedKV.of(loaded)
    one = replace(four, slots=1)
    assert four.slots == 4 and estimated_kv_bytes(one) > 0
    assert estimated_kv_bytes(four) == 4 * estimated_kv_bytes(one)
