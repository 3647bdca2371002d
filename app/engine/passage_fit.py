"""The person's document passages in the newest message, fitted with the model's own tokens: a
message may carry `passages` ({"head", "blocks", "tail", "none"}: the instruction, the numbered
passages, the question, and what to say when none fits) beside its `content` (all of them). When
the prompt with every passage does not fit even after the context policy dropped the old turns,
the most passages that do fit are kept (the best come first), and the reply's metrics say how many.

Host-internal (prompt_plan.py); the passages were chosen and sized by the window or the command
line (app/docs/turn_sources.py), whose estimate this makes exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from app.context_policy import ContextOverflow

T = TypeVar("T")


def compose(passages: dict[str, Any], kept: int) -> str:
    """The message's text with the first `kept` passages."""
    blocks = [str(b) for b in passages.get("blocks", [])][:kept]
    if not blocks:
        return str(passages.get("none", "")) + str(passages.get("tail", ""))
    return str(passages.get("head", "")) + "\n\n".join(blocks) + str(passages.get("tail", ""))


def fit_passages(messages: list[dict[str, Any]], fit: Callable[[list[dict[str, Any]]], T]) -> tuple[T, int | None]:
    """`fit(messages)` with as many of the newest message's passages as fit, and how many that is
    (None: the messages carry no passages). Raises what `fit` raises when even none fit."""
    at = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i].get("passages"), dict)), None)
    if at is None:
        return fit(messages), None
    passages = messages[at]["passages"]
    total = len(passages.get("blocks", []))

    def attempt(kept: int) -> T:
        trial = list(messages)
        trial[at] = {k: v for k, v in messages[at].items() if k != "passages"} | {"content": compose(passages, kept)}
        return fit(trial)

    try:
        return attempt(total), total
    except ContextOverflow:
        if total == 0:
            raise
    low, high = 0, total - 1  # the most that fit lies in [low, high]; `total` did not
    best: T | None = None
    best_kept = -1
    while low <= high:
        mid = (low + high) // 2
        try:
            best, best_kept = attempt(mid), mid
            low = mid + 1
        except ContextOverflow:
            if mid == 0:
                raise
            high = mid - 1
    assert best is not None
    return best, best_kept
