"""What a reply's first token made known, before its end: the figures a window shows early."""

from __future__ import annotations

from typing import Any


def first_figures(generation: Any) -> dict[str, Any] | None:
    """The time to first token, the prompt's tokens (and those reused) and its reading speed, in
    the keys of the final metrics; None before the first token (or for a stream that does not
    report them)."""
    ttft = getattr(generation, "ttft_ms", None)
    if ttft is None:
        return None
    figures: dict[str, Any] = {"ttft_ms": round(ttft, 3)}
    started = getattr(generation, "started", None)
    if started is not None:
        figures["prompt_tokens"], figures["cached_tokens"] = started.prompt_tokens, started.cached_tokens
        if started.prefill_ms:  # as the engine's final prompt_tps: tokens read over prefill time
            read = started.prompt_tokens - started.cached_tokens
            figures["prompt_tps"] = round(read / (started.prefill_ms / 1000.0), 2)
    return figures
