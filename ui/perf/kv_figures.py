"""The performance panel's lines for the loaded model's KV cache (its K and V types, the KV
buffers llama.cpp reported beside the memory estimate's KV part, flash attention), for the last
reply's prompt (its reading speed, and how much of it was reused: kept in the engine or restored
from the conversation's saved state) and for its drafting (tokens drafted and accepted, or why
there were none). `estimated_kv_bytes`
reads the model's header: call it off the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.draft_metrics import draft_figures
from ui.theme import format_bytes, format_int, format_rate


@dataclass(frozen=True)
class LoadedKV:
    """What the panel keeps of a LoadedModel for these lines."""

    path: str
    n_ctx: int
    n_gpu_layers: int
    type_k: str
    type_v: str
    kv_bytes: int  # llama.cpp's own report of its KV buffers (0: not reported)
    flash_attn: str  # "auto" | "on" | "off", as loaded
    draft_model: str  # the draft model's file name, "" for none
    slots: int = 1  # replies the engine holds at once, each with n_ctx of KV cache

    @classmethod
    def of(cls, loaded: Any) -> LoadedKV:
        return cls(
            str(loaded.path),
            int(loaded.n_ctx),
            int(loaded.n_gpu_layers or 0),
            str(loaded.type_k),
            str(loaded.type_v),
            int(loaded.kv_bytes or 0),
            str(loaded.flash_attn),
            str(loaded.draft_model or ""),
            int(getattr(loaded, "slots", 1) or 1),
        )


def estimated_kv_bytes(kv: LoadedKV) -> int:
    """The memory estimate's KV cache for this load, every slot's (models/memory_estimate.py); reads the header."""
    from models.gguf_validate import read_gguf_header
    from models.memory_estimate import compute_parts
    from models.model_facts import facts_from_header

    facts = facts_from_header(read_gguf_header(kv.path))
    e = compute_parts(
        facts, None, kv.n_ctx, kv.n_gpu_layers, kv.type_k, type_v=kv.type_v, flash_attn=kv.flash_attn != "off", slots=kv.slots
    )
    return e.kv_ram + e.kv_vram


def kv_text(kv: LoadedKV | None, estimate: int | None) -> str:
    """E.g. "q8_0 · 148 MB (estimated 150 MB) · flash attention on"."""
    if kv is None:
        return "–"
    types = kv.type_k if kv.type_k == kv.type_v else f"K {kv.type_k}, V {kv.type_v}"
    measured = format_bytes(kv.kv_bytes) if kv.kv_bytes else "size not reported"
    if estimate:
        measured += f" (estimated {format_bytes(estimate)})"
    return f"{types} · {measured} · flash attention {kv.flash_attn}"


def drafting_text(metrics: dict[str, Any], kv: LoadedKV | None) -> str:
    """The last reply's drafting, or what will draft before the first reply."""
    figures = draft_figures(metrics)
    if figures is not None:
        return figures.sentence()
    draft = metrics.get("draft")
    if isinstance(draft, dict):
        if draft.get("mode") == "off" and not draft.get("stopped"):
            return "off"
        stopped = draft.get("stopped")
        return "no tokens drafted in this reply" + (f" (off: {stopped})" if isinstance(stopped, str) and stopped else "")
    if not metrics and kv is not None and kv.draft_model:
        return f"draft model {kv.draft_model} loaded"
    return "–"


def prompt_text(metrics: dict[str, Any]) -> str:
    """E.g. "26 read at 590 tok/s · 3,177 from the saved state": the prompt tokens the engine read
    for the last reply, and where the rest came from (the engine's cache or the saved state on disk);
    with images, what encoding them took ("1 image: 256 tokens, encoded in 840 ms")."""
    rate, total, cached = (_count(metrics.get(k)) for k in ("prompt_tps", "prompt_tokens", "cached_tokens"))
    rate_text = format_rate(rate) if rate is not None else "–"
    if not total:
        return rate_text
    cached = int(cached or 0)
    text = f"{format_int(int(total) - cached)} read" + (f" at {rate_text}" if rate is not None else "")
    if cached > 0:
        state = metrics.get("state_cache")
        from_disk = isinstance(state, dict) and state.get("disk_hit") is True
        text += f" · {format_int(cached)} " + ("from the saved state" if from_disk else "reused")
    return text + (f" · {images}" if (images := image_text(metrics)) else "")


def image_text(metrics: dict[str, Any]) -> str:
    """E.g. "2 images: 512 tokens, encoded in 1,680 ms", or "1 image, reused" when the engine's
    cache held it; "" for a reply without images."""
    n = _count(metrics.get("images"))
    if not n:
        return ""
    head = f"{int(n)} image" + ("s" if n != 1 else "")
    tokens, ms = _count(metrics.get("image_tokens")), _count(metrics.get("image_encode_ms"))
    if not tokens:
        return f"{head}, reused"
    if ms is None:
        return f"{head}: {format_int(int(tokens))} tokens"
    took = f"{ms:.1f}" if ms < 10 else format_int(round(ms))  # (a small projector's take under a millisecond)
    return f"{head}: {format_int(int(tokens))} tokens, encoded in {took} ms"


def _count(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
