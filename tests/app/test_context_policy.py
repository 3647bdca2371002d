"""Context policy: drop the oldest whole turns, keep the system prompt and the newest message."""

from __future__ import annotations

import pytest

from app.context_policy import ContextOverflow, fit_messages, reply_reserve, split_turns


def _count(messages: list[dict]) -> int:
    """One token per character of content plus 2 per message, like a template's wrapper."""
    return sum(len(m["content"]) + 2 for m in messages)


def _conversation(n_turns: int, size: int = 10) -> list[dict]:
    msgs = [{"role": "system", "content": "S" * 8}]
    for i in range(n_turns):
        msgs.append({"role": "user", "content": f"{i}".ljust(size, "u")})
        msgs.append({"role": "assistant", "content": f"{i}".ljust(size, "a")})
    msgs.append({"role": "user", "content": "last".ljust(size, "q")})
    return msgs


def test_everything_fits_nothing_dropped() -> None:
    msgs = _conversation(3)
    fit = fit_messages(msgs, _count, n_ctx=1000, reserve=100)
    assert fit.messages == msgs and fit.dropped_turns == 0 and fit.prompt_tokens == _count(msgs)


def test_oldest_turns_are_dropped_whole_system_and_newest_kept() -> None:
    msgs = _conversation(10)  # system 10 + 10 turns * 24 + last 12 = 262 tokens
    fit = fit_messages(msgs, _count, n_ctx=200, reserve=50)  # budget 150
    assert fit.prompt_tokens <= 150
    assert fit.messages[0]["role"] == "system"
    assert fit.messages[-1]["content"].startswith("last")
    assert fit.messages[1]["role"] == "user"  # a whole turn: never an orphan reply
    kept_turns = (len(fit.messages) - 2) // 2
    assert fit.dropped_turns == 10 - kept_turns
    # As many turns as fit: keeping one more would not.
    one_more = [msgs[0]] + msgs[1 + 2 * (fit.dropped_turns - 1) :]
    assert _count(one_more) > 150


def test_bisection_counts_few_times() -> None:
    calls = []

    def counting(messages: list[dict]) -> int:
        calls.append(len(messages))
        return _count(messages)

    fit_messages(_conversation(200), counting, n_ctx=400, reserve=100)
    assert len(calls) <= 12


def test_only_the_newest_message_left_and_still_too_long_is_a_clear_error() -> None:
    msgs = [{"role": "system", "content": "S" * 20}, {"role": "user", "content": "x" * 500}]
    with pytest.raises(ContextOverflow) as err:
        fit_messages(msgs, _count, n_ctx=256, reserve=64)
    assert "your message is 524 tokens" in str(err.value)
    assert "context holds 256" in str(err.value)
    assert err.value.needed == 524


def test_error_after_dropping_every_older_turn() -> None:
    msgs = _conversation(3) + [{"role": "assistant", "content": "a"}, {"role": "user", "content": "z" * 400}]
    with pytest.raises(ContextOverflow):
        fit_messages(msgs, _count, n_ctx=256, reserve=64)


def test_turn_structure() -> None:
    msgs = [
        {"role": "assistant", "content": "greeting"},
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "tool", "content": "t1"},
        {"role": "user", "content": "u2"},
    ]
    system, turns = split_turns(msgs)
    assert [m["content"] for m in system] == ["s"]
    assert [[m["content"] for m in t] for t in turns] == [["greeting"], ["u1", "a1", "t1"], ["u2"]]


def test_reply_reserve() -> None:
    assert reply_reserve(None, 8192) == 256
    assert reply_reserve(1000, 8192) == 1000
    assert reply_reserve(1000, 512) == 128
    assert reply_reserve(0, 256) == 64
