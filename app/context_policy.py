"""Fitting a conversation into the model's context: which old turns to drop (a pure function).

Policy (DESIGN.md section 3): drop the oldest whole turns first; a turn is a user message
and the replies after it. The system prompt and the newest user message (with anything
after it) are always kept. If even those do not fit, the turn cannot run and the error
says by how much.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, Any]]


class ContextOverflow(ValueError):
    """Even the system prompt plus the newest message do not fit; the message says why."""

    def __init__(self, needed: int, n_ctx: int, reserve: int) -> None:
        self.needed, self.n_ctx, self.reserve = needed, n_ctx, reserve
        super().__init__(
            f"your message is {needed} tokens (with the system prompt and chat format); "
            f"the model's context holds {n_ctx}, and {reserve} of those are kept free for the reply"
        )


@dataclass(frozen=True)
class FitResult:
    messages: Messages
    dropped_turns: int
    prompt_tokens: int


def split_turns(messages: Sequence[dict[str, Any]]) -> tuple[Messages, list[Messages]]:
    """(system messages, turns). Each turn starts at a user message; anything before the
    first user message that is not a system message forms a turn of its own."""
    system: Messages = []
    turns: list[Messages] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            system.append(dict(m))
        elif role == "user" or not turns:
            turns.append([dict(m)])
        else:
            turns[-1].append(dict(m))
    return system, turns


def fit_messages(
    messages: Sequence[dict[str, Any]],
    count_tokens: Callable[[Messages], int],
    n_ctx: int,
    reserve: int,
) -> FitResult:
    """Keep as many of the newest turns as fit in `n_ctx - reserve` tokens.

    `count_tokens` renders and tokenizes a message list with the model's own tokenizer.
    Token counts only grow as turns are added, so the cut is found by bisection
    (O(log turns) calls of count_tokens).
    """
    budget = n_ctx - reserve
    system, turns = split_turns(messages)

    def build(dropped: int) -> Messages:
        kept = system + [m for turn in turns[dropped:] for m in turn]
        return kept

    full = build(0)
    n_full = count_tokens(full)
    if n_full <= budget or len(turns) <= 1:
        if n_full > budget:
            raise ContextOverflow(n_full, n_ctx, reserve)
        return FitResult(full, 0, n_full)

    last = len(turns) - 1  # dropping this many keeps only the newest turn
    n_min = count_tokens(build(last))
    if n_min > budget:
        raise ContextOverflow(n_min, n_ctx, reserve)
    lo, hi, hi_count = 1, last, n_min  # invariant: build(hi) fits; build(lo - 1) does not
    while lo < hi:
        mid = (lo + hi) // 2
        n = count_tokens(build(mid))
        if n <= budget:
            hi, hi_count = mid, n
        else:
            lo = mid + 1
    return FitResult(build(hi), hi, hi_count)


def reply_reserve(max_tokens: int | None, n_ctx: int, default: int = 256) -> int:
    """Tokens kept free for the reply: min(max_tokens or 256, n_ctx / 4)."""
    return max(1, min(max_tokens or default, n_ctx // 4))
