"""The figures of one reply (token counts, timings, llama.cpp's own counters, the KV state
cache, where the model runs), as the engine host's Finished message carries them."""

from __future__ import annotations

from typing import Any

import llama_cpp

from app.engine.host.templates import Rendered


def reply_metrics(
    session: Any,
    slot: Any,
    tokens: list[int],
    cached: int,
    dropped: int,
    source: str,
    stop_reason: str,
    n_sampled: int,
    t_first: float,
    t_last: float,
    t_call: float,
    prepare_ms: float,
    rendered: Rendered | None,
    state_cache: dict[str, Any],
) -> dict[str, Any]:
    """The figures of one reply, as Finished carries them to the parent. `session`: the
    ModelSession that ran it (its llm, n_ctx and placement; not imported here, which it imports);
    `slot`: the slot it ran in; `state_cache`: what the state cache did for it. llama.cpp's own
    counters are the context's since the reply started: its own when it ran alone."""
    prefill_s = (t_first - t_call) if n_sampled else 0.0
    gen_s = (t_last - t_first) if n_sampled > 1 else 0.0
    evaluated = len(tokens) - cached
    perf = llama_cpp.llama_perf_context(session.llm.ctx)
    m: dict[str, Any] = {
        "prompt_tokens": len(tokens),
        "cached_tokens": cached,
        "prefill_ms": round(prefill_s * 1000, 3) if n_sampled else None,
        "prompt_tps": round(evaluated / prefill_s, 2) if n_sampled and prefill_s > 0 else None,
        "gen_tokens": n_sampled,
        "gen_ms": round(gen_s * 1000, 3),
        "gen_tps": round((n_sampled - 1) / gen_s, 2) if gen_s > 0 else None,
        "stop_reason": stop_reason,
        "n_ctx": session.n_ctx,
        "context_used": int(slot.n_tokens),
        "dropped_turns": dropped,
        "template_source": source,
        "prepare_ms": round(prepare_ms, 3),
        "llama_p_eval_ms": round(perf.t_p_eval_ms, 3),
        "llama_n_p_eval": int(perf.n_p_eval),
        "llama_eval_ms": round(perf.t_eval_ms, 3),
        "llama_n_eval": int(perf.n_eval),
    }
    if rendered is not None and rendered.note:
        m["template_note"] = rendered.note
    m["state_cache"] = state_cache
    placed = session.placement
    m["placement"] = {
        "backend": placed.backend,
        "device": placed.device,
        "n_gpu_layers": placed.n_gpu_layers,
        "n_layers": placed.n_layers,
        "kv_on_gpu": placed.kv_on_gpu,
        "vram_used": placed.vram_used,
        "vram_estimate": placed.vram_estimate,
        "note": placed.note,
    }
    return m
