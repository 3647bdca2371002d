"""Fitting a conversation into the model's context: which old turns to drop (a pure function).

Policy: drop the oldest whole turns first; a turn is a user message
and the replies after it. The system prompt and the newest user message (with anything
after it) are always kept. If even those do not fit, the turn cannot run and the error
says by how much.

A turn too large to fit even alone (a huge paste) is found without rendering the whole
conversation: by a cheap lower bound on its tokens (`min_tokens`) when that is enough, else
by measuring it alone once and remembering the count (`known_tokens`). Later turns then
drop it, and everything older, without rendering or tokenizing it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, Any]]


class ContextOverflow(ValueError):
    """Even the system prompt plus the newest message do not fit; the message says why."""

    def __init__(self, needed: int, n_ctx: int, reserve: int, *, at_least: bool = False) -> None:
        self.needed, self.n_ctx, self.reserve, self.at_least = needed, n_ctx, reserve, at_least
        size = f"at least {needed}" if at_least else f"{needed}"
        super().__init__(
            f"your message is {size} tokens (with the system prompt and chat format); "
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
    *,
    known_tokens: Callable[[Messages], int | None] | None = None,
    min_tokens: Callable[[Messages], int] | None = None,
) -> FitResult:
    """Keep as many of the newest turns as fit in `n_ctx - reserve` tokens.

    `count_tokens` renders and tokenizes a message list with the model's own tokenizer.
    Token counts only grow as turns are added, so the cut is found by bisection
    (O(log turns) calls of count_tokens).

    A turn that cannot fit even alone with the system prompt cannot fit in any prompt
    that keeps it, so it and every older turn are dropped before the bisection (the cut
    the bisection would find, found without counting them), and a newest turn like that is
    refused. Such a turn is recognised, newest first, by
    - `min_tokens(list)`: a lower bound on the tokens of any prompt that contains the
      list's messages, computed without rendering (a bound over the budget refuses the
      newest turn with "at least N tokens"); else
    - counting the system prompt and the turn alone, only for a turn with large text (see
      `_could_overflow_alone`). `known_tokens` returns an earlier count_tokens result for
      the same list, or None; with it an old large turn is counted once, not on every turn.
    """
    budget = n_ctx - reserve
    system, turns = split_turns(messages)
    last = len(turns) - 1  # dropping this many keeps only the newest turn
    counted: dict[int, int] = {}

    def build(dropped: int) -> Messages:
        return system + [m for turn in turns[dropped:] for m in turn]

    def count(dropped: int) -> int:
        if dropped not in counted:
            counted[dropped] = count_tokens(build(dropped))
        return counted[dropped]

    if last >= 0 and min_tokens is not None:
        at_least = min_tokens(system + turns[last])
        if at_least > budget:
            raise ContextOverflow(at_least, n_ctx, reserve, at_least=True)
    if last >= 0 and _could_overflow_alone(system, turns[last], budget):
        n_newest = count(last)
        if n_newest > budget:
            raise ContextOverflow(n_newest, n_ctx, reserve)
    floor = _first_keepable(system, turns, budget, count_tokens, known_tokens, min_tokens)

    n_first = count(floor)
    if n_first <= budget or floor >= last:
        if n_first > budget:
            raise ContextOverflow(n_first, n_ctx, reserve)
        return FitResult(build(floor), floor, n_first)

    n_min = count(last)
    if n_min > budget:
        raise ContextOverflow(n_min, n_ctx, reserve)
    lo, hi, hi_count = floor + 1, last, n_min  # invariant: build(hi) fits; build(lo - 1) does not
    while lo < hi:
        mid = (lo + hi) // 2
        n = count(mid)
        if n <= budget:
            hi, hi_count = mid, n
        else:
            lo = mid + 1
    return FitResult(build(hi), hi, hi_count)


def _first_keepable(
    system: Messages,
    turns: list[Messages],
    budget: int,
    count_tokens: Callable[[Messages], int],
    known_tokens: Callable[[Messages], int | None] | None,
    min_tokens: Callable[[Messages], int] | None,
) -> int:
    """How many of the oldest turns must go because a turn among them cannot fit even alone
    (0 if none). Only older turns with large text are looked at, newest first; the newest
    turn is left to the caller."""
    for i in range(len(turns) - 2, -1, -1):
        if not _could_overflow_alone(system, turns[i], budget):
            continue
        alone = system + turns[i]
        if min_tokens is not None and min_tokens(alone) > budget:
            return i + 1
        n = known_tokens(alone) if known_tokens is not None else None
        if n is None:
            n = count_tokens(alone)
        if n > budget:
            return i + 1
    return 0


def _could_overflow_alone(system: Messages, turn: Messages, budget: int) -> bool:
    """Whether the turn's text is large enough to be worth measuring on its own.

    A heuristic that only decides what is counted, never what is kept: it holds the turn's
    and the system prompt's UTF-8 size against half the budget (a llama.cpp tokenizer makes
    at most about one token per byte, plus the template's own tokens).
    """
    limit = budget // 2
    size = 0
    for m in (*system, *turn):
        content = m.get("content")
        if isinstance(content, str):
            size += len(content.encode("utf-8", "surrogatepass"))
        if size > limit:
            return True
    return False


def reply_reserve(max_tokens: int | None, n_ctx: int, default: int = 256) -> int:
    """Tokens kept free for the reply: min(max_tokens or 256, n_ctx / 4)."""
    return max(1, min(max_tokens or default, n_ctx // 4))
