"""Small helpers shared by the `cove` subcommands: printing (JSON, sizes, metric lines) and argument types."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, TextIO

from app.draft_metrics import draft_figures
from app.placement.line import chosen_line
from models.units import format_size


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj


def print_json(obj: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(to_jsonable(obj), out, indent=2, ensure_ascii=False)
    out.write("\n")


def human_size(n: int | None) -> str:
    return "?" if n is None else format_size(n)


def metrics_line(model_name: str, status: str, metrics: dict) -> str:
    """One line a person can read: model · status · TTFT · prompt speed · generation speed · drafted
    and accepted tokens (when it drafted) · context."""

    def num(key: str, fmt: str) -> str | None:
        value = metrics.get(key)
        return fmt.format(value) if isinstance(value, (int, float)) else None

    parts = [model_name, status]
    where = chosen_line(metrics)
    if where is not None:  # Cove chose the machine: say which and why
        parts.append(where)
    ttft = num("ttft_ms", "TTFT {:.0f} ms")
    if ttft:
        parts.append(ttft)
    if isinstance(metrics.get("prompt_tokens"), int):
        cached = metrics.get("cached_tokens") or 0
        pp = num("prompt_tps", "{:.1f} tok/s")
        parts.append(f"prompt {metrics['prompt_tokens']} tok ({cached} cached)" + (f" at {pp}" if pp else ""))
    images = image_figures(metrics)
    if images:
        parts.append(images)
    if isinstance(metrics.get("gen_tokens"), int):
        tg = num("gen_tps", "{:.1f} tok/s")
        parts.append(f"reply {metrics['gen_tokens']} tok" + (f" at {tg}" if tg else ""))
    draft = draft_figures(metrics)
    if draft is not None:
        parts.append(draft.short())
    if isinstance(metrics.get("context_used"), int) and isinstance(metrics.get("n_ctx"), int):
        parts.append(f"context {metrics['context_used']}/{metrics['n_ctx']}")
    if isinstance(metrics.get("engine_uss_bytes"), int):
        parts.append(f"engine {human_size(metrics['engine_uss_bytes'])} private")
    return " · ".join(parts)


def image_figures(metrics: dict) -> str | None:
    """ "2 images (32 tok, encoded in 4 ms)", "1 image (reused)" when the cache held it; None without images."""
    n = metrics.get("images")
    if not isinstance(n, int) or not n:
        return None
    tokens, ms = metrics.get("image_tokens") or 0, metrics.get("image_encode_ms")
    head = f"{n} image{'s' if n != 1 else ''}"
    if not tokens:
        return f"{head} (reused)"
    if not isinstance(ms, (int, float)):
        return f"{head} ({tokens} tok)"
    return f"{head} ({tokens} tok, encoded in {ms:.1f} ms)" if ms < 10 else f"{head} ({tokens} tok, encoded in {ms:.0f} ms)"


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (token counts, context sizes, limits)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value
