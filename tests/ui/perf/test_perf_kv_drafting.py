"""The performance panel's KV cache line (types, llama.cpp's measured KV buffers beside the
estimate read off the UI thread, flash attention) and its drafting line for the last reply
(accepted of drafted, the rate, why drafting stopped; a draft model loaded before any reply)."""

from __future__ import annotations

from pathlib import Path

from app.engine.loaded import LoadedModel
from models.gguf_validate import read_gguf_header
from models.memory_estimate import compute_parts
from models.model_facts import facts_from_header
from tests.support.tiny_model import write_tiny_gguf
from ui.perf.panel import PerfPanel
from ui.theme import format_bytes


def _loaded(path: Path, **kw) -> LoadedModel:
    fields = {
        "path": str(path),
        "n_ctx": 512,
        "n_ctx_train": 512,
        "n_threads": 1,
        "n_gpu_layers": 0,
        "backend": "cpu",
        "template_source": "fallback:plain",
        "template_note": "",
        "load_ms": 1.0,
        "type_k": "f16",
        "type_v": "f16",
        "kv_bytes": 0,
        "flash_attn": "auto",
        **kw,
    }
    return LoadedModel(**fields)  # type: ignore[arg-type]


def test_the_kv_line_shows_the_types_the_measured_size_beside_the_estimate_and_flash_attention(
    qtbot, panel: PerfPanel, tmp_path: Path
) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    facts = facts_from_header(read_gguf_header(path))
    q = compute_parts(facts, None, 512, 0, "q8_0", type_v="q4_0")
    estimate = q.kv_ram
    panel.set_loaded(_loaded(path, type_k="q8_0", type_v="q4_0", kv_bytes=106_000, flash_attn="on"))
    expected = f"K q8_0, V q4_0 · {format_bytes(106_000)} (estimated {format_bytes(estimate)}) · flash attention on"
    qtbot.waitUntil(lambda: panel.label_text("kv") == expected, timeout=5000)
    f16 = compute_parts(facts, None, 512, 0, "f16").kv_ram
    panel.set_loaded(_loaded(path))  # not reported by llama.cpp: the estimate alone
    qtbot.waitUntil(
        lambda: panel.label_text("kv") == f"f16 · size not reported (estimated {format_bytes(f16)}) · flash attention auto", timeout=5000
    )


def test_the_drafting_line_follows_the_last_reply(qtbot, panel: PerfPanel, tmp_path: Path) -> None:
    assert panel.label_text("drafting") == "–"
    panel.set_loaded(_loaded(write_tiny_gguf(tmp_path / "tiny.gguf"), draft_model="tiny-draft.gguf"))
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "draft model tiny-draft.gguf loaded", timeout=5000)
    panel.set_turn_metrics({"gen_tps": 50.0, "draft": {"mode": "model", "drafted": 64, "accepted": 48, "steps": 16, "stopped": None}})
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "48 of 64 drafted tokens accepted (75%), with the draft model", timeout=5000)
    panel.set_turn_metrics({"gen_tps": 50.0, "draft": {"mode": "lookup", "drafted": 0, "accepted": 0, "steps": 0, "stopped": "not paying"}})
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "no tokens drafted in this reply (off: not paying)", timeout=5000)
    panel.set_turn_metrics({"gen_tps": 50.0, "draft": {"mode": "off", "drafted": 0, "accepted": 0, "steps": 0, "stopped": None}})
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "off", timeout=5000)
    panel.set_turn_metrics({"gen_tps": 50.0})  # a reply saved before drafting existed
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "–", timeout=5000)
    panel.set_turn_metrics({"gen_tps": 50.0, "remote": {"host": "gpu-box.lan:8000"}})
    qtbot.waitUntil(lambda: panel.label_text("drafting") == "on the server", timeout=5000)
    assert panel.label_text("kv") == "on the server"
