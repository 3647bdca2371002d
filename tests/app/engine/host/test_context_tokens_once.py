"""A huge message is counted once per model: later turns drop it without rendering or
tokenizing it again, and ordinary conversations keep exactly the turns they kept before."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.context_policy import ContextOverflow, FitResult, Messages, fit_messages, split_turns

HUGE = ("pasted log line 0123456789 abcdefghij " * 6000)[:200_000]


# ---- the policy, against a fake tokenizer ---------------------------------------------


def _count(messages: list[dict]) -> int:
    """One token per character of content plus 2 per message, like a template's wrapper."""
    return sum(len(m["content"]) + 2 for m in messages)


def _old_fit(messages: list[dict], count_tokens: Callable[[Messages], int], n_ctx: int, reserve: int) -> FitResult:
    """fit_messages as it was before counts were remembered (commit b9be376), for comparison."""
    budget = n_ctx - reserve
    system, turns = split_turns(messages)

    def build(dropped: int) -> Messages:
        return system + [m for turn in turns[dropped:] for m in turn]

    full = build(0)
    n_full = count_tokens(full)
    if n_full <= budget or len(turns) <= 1:
        if n_full > budget:
            raise ContextOverflow(n_full, n_ctx, reserve)
        return FitResult(full, 0, n_full)
    last = len(turns) - 1
    n_min = count_tokens(build(last))
    if n_min > budget:
        raise ContextOverflow(n_min, n_ctx, reserve)
    lo, hi, hi_count = 1, last, n_min
    while lo < hi:
        mid = (lo + hi) // 2
        n = count_tokens(build(mid))
        if n <= budget:
            hi, hi_count = mid, n
        else:
            lo = mid + 1
    return FitResult(build(hi), hi, hi_count)


def _min_tokens(messages: Messages) -> int:
    """A true lower bound of _count for any list containing these messages (user and system
    text only, a third of it), as the host's bound is for the real tokenizer."""
    return sum(len(m["content"]) for m in messages if m["role"] in ("user", "system")) // 3


def _outcome(fit: Callable[[], FitResult]) -> tuple:
    """What was kept, or that the turn was refused and with which count (None: a bound)."""
    try:
        r = fit()
    except ContextOverflow as exc:
        return ("overflow", None if exc.at_least else exc.needed)
    return (r.dropped_turns, r.prompt_tokens, r.messages)


def _same(old: tuple, new: tuple) -> bool:
    return new == old or (old[0] == new[0] == "overflow" and new[1] is None)


def _random_conversation(rng: random.Random, big: bool) -> list[dict]:
    msgs: list[dict] = []
    if rng.random() < 0.8:
        msgs.append({"role": "system", "content": "S" * rng.randint(1, 40)})
    for i in range(rng.randint(0, 25)):
        size = rng.choice([3, 10, 30, 80]) if not big or rng.random() < 0.85 else rng.choice([150, 400, 2000])
        msgs.append({"role": "user", "content": f"u{i}".ljust(size, "u")})
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            msgs.append({"role": "assistant", "content": f"a{i}".ljust(rng.choice([5, 20, 60]), "a")})
    msgs.append({"role": "user", "content": "last".ljust(rng.choice([4, 20, 120, 600]), "q")})
    return msgs


@pytest.mark.parametrize("big", [False, True])
def test_the_same_turns_are_kept_as_before(big: bool) -> None:
    rng = random.Random(16 + big)
    differences = []
    for case in range(400):
        msgs = _random_conversation(rng, big)
        n_ctx, reserve = rng.choice([(256, 64), (512, 64), (300, 20), (1024, 256)])
        memo: dict[tuple, int] = {}

        def remembering(m: Messages) -> int:
            n = _count(m)
            memo[tuple((x["role"], x["content"]) for x in m)] = n
            return n

        def known(m: Messages) -> int | None:
            return memo.get(tuple((x["role"], x["content"]) for x in m))

        old = _outcome(lambda: _old_fit(msgs, _count, n_ctx, reserve))
        for _ in range(2):  # the second call finds the first one's counts in the memo
            new = _outcome(lambda: fit_messages(msgs, remembering, n_ctx, reserve, known_tokens=known))
            if new != old:
                differences.append((case, old[:2], new[:2]))
            bounded = _outcome(lambda: fit_messages(msgs, remembering, n_ctx, reserve, known_tokens=known, min_tokens=_min_tokens))
            if not _same(old, bounded):
                differences.append((case, "with a bound", old[:2], bounded[:2]))
        if _outcome(lambda: fit_messages(msgs, _count, n_ctx, reserve)) != old:
            differences.append((case, "without a memo"))
    assert differences == []


def test_ordinary_conversations_are_counted_exactly_as_before() -> None:
    rng = random.Random(3)
    for _ in range(200):
        msgs = _random_conversation(rng, big=False)[:-1] + [{"role": "user", "content": "last"}]
        old_calls: list[int] = []
        new_calls: list[int] = []
        _outcome(lambda: _old_fit(msgs, lambda m: old_calls.append(len(m)) or _count(m), 1024, 256))
        _outcome(
            lambda: fit_messages(
                msgs, lambda m: new_calls.append(len(m)) or _count(m), 1024, 256, known_tokens=lambda m: None, min_tokens=_min_tokens
            )
        )
        assert new_calls == old_calls


def _history_with_a_refused_paste() -> list[dict]:
    msgs = [{"role": "system", "content": "Be brief."}]
    for i in range(6):
        msgs += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    return msgs + [{"role": "user", "content": HUGE}]  # its reply was an error: not resent


def test_a_huge_old_message_is_counted_once_then_dropped_unseen() -> None:
    memo: dict[tuple, int] = {}
    counted: list[Messages] = []

    def count(m: Messages) -> int:
        counted.append(m)
        n = _count(m)
        memo[tuple((x["role"], x["content"]) for x in m)] = n
        return n

    def known(m: Messages) -> int | None:
        return memo.get(tuple((x["role"], x["content"]) for x in m))

    def huge_counts() -> int:
        return sum(1 for m in counted if any(x["content"] is HUGE for x in m))

    msgs = _history_with_a_refused_paste()
    with pytest.raises(ContextOverflow) as err:
        fit_messages(msgs, count, 8192, 256, known_tokens=known)
    assert err.value.needed == _count([msgs[0], msgs[-1]])  # system prompt + the paste
    assert huge_counts() == 1
    for turn in range(3):
        msgs = msgs + [{"role": "user", "content": f"and now {turn}?"}]
        fit = fit_messages(msgs, count, 8192, 256, known_tokens=known)
        assert fit.dropped_turns == 7  # the paste and every turn before it
        assert fit.messages == [msgs[0]] + msgs[14:]
        assert fit == _old_fit(msgs, _count, 8192, 256)
        msgs = msgs + [{"role": "assistant", "content": "ok"}]
    assert huge_counts() == 1


def test_a_paste_whose_bound_is_over_the_budget_is_never_counted() -> None:
    counted: list[Messages] = []

    def count(m: Messages) -> int:
        counted.append(m)
        return _count(m)

    msgs = _history_with_a_refused_paste()
    with pytest.raises(ContextOverflow) as err:
        fit_messages(msgs, count, 8192, 256, known_tokens=lambda m: None, min_tokens=_min_tokens)
    assert err.value.at_least and err.value.needed == _min_tokens([msgs[0], msgs[-1]])
    assert str(err.value).startswith(f"your message is at least {err.value.needed} tokens")
    assert counted == []
    msgs = msgs + [{"role": "user", "content": "and now?"}]
    fit = fit_messages(msgs, count, 8192, 256, known_tokens=lambda m: None, min_tokens=_min_tokens)
    assert fit == _old_fit(msgs, _count, 8192, 256) and fit.dropped_turns == 7
    assert not any(x["content"] is HUGE for m in counted for x in m)


# ---- the engine host's session, with the tiny model ------------------------------------

from app.engine.host.prompt_counts import TokenCounts, messages_digest, min_prompt_tokens, non_space_bytes  # noqa: E402
from app.engine.host.session import ModelSession  # noqa: E402
from app.engine.protocol import Failed, Finished, Generate, Load  # noqa: E402


@pytest.fixture
def session(tiny_gguf_with_template: Path) -> Iterator[ModelSession]:
    s = ModelSession(Load("l", str(tiny_gguf_with_template), n_ctx=512, n_threads=1))
    yield s
    s.close()


class _Work:
    """Characters rendered and tokenized by a session, counted by wrapping its methods."""

    def __init__(self, session: ModelSession) -> None:
        self.rendered: list[int] = []
        self.tokenized: list[int] = []
        tokenize, render = session.tokenize, session.format.render

        def counting_tokenize(text: str, *, add_bos: bool) -> list[int]:
            self.tokenized.append(len(text))
            return tokenize(text, add_bos=add_bos)

        def counting_render(messages: Messages):  # type: ignore[no-untyped-def]
            out = render(messages)
            self.rendered.append(len(out.text))
            return out

        session.tokenize = counting_tokenize  # type: ignore[method-assign]
        session.format.render = counting_render  # type: ignore[method-assign]

    def reset(self) -> None:
        self.rendered.clear()
        self.tokenized.clear()


def _turn(session: ModelSession, messages: list[dict]) -> Finished | Failed:
    req = Generate("g", "c1", messages, max_tokens=4, seed=1, ignore_eos=True)
    return session.generate(req, lambda _line: None, threading.Event())


def _two_turns(session: ModelSession) -> list[dict]:
    history: list[dict] = [{"role": "system", "content": "Be brief."}]
    for q in ("hello", "and more"):
        history.append({"role": "user", "content": q})
        reply = _turn(session, history)
        assert isinstance(reply, Finished)
        history.append({"role": "assistant", "content": reply.text})
    return history


def _later_turns_never_look_at_it(session: ModelSession, work: _Work, history: list[dict]) -> None:
    # As app.turn.prompt builds it, the next prompt has the paste and no reply to it (an error is not resent).
    for q in ("what now?", "and then?"):
        work.reset()
        history.append({"role": "user", "content": q})
        reply = _turn(session, history)
        assert isinstance(reply, Finished), reply
        assert sum(work.tokenized) < 1000 and sum(work.rendered) < 1000  # the paste is not looked at
        assert len(work.rendered) == 1  # the kept prompt, rendered once
        assert reply.metrics["dropped_turns"] == 3  # the paste and the two turns before it
        history.append({"role": "assistant", "content": reply.text})


def test_a_huge_paste_is_refused_without_tokenizing_it_and_later_turns_skip_it(session: ModelSession) -> None:
    history = _two_turns(session)
    work = _Work(session)
    history.append({"role": "user", "content": HUGE})
    refused = _turn(session, history)
    assert isinstance(refused, Failed) and refused.kind == "context"
    assert "your message is at least" in refused.message and "context holds 512" in refused.message
    assert work.tokenized == [] and work.rendered == []  # its bound alone is over the context
    _later_turns_never_look_at_it(session, work, history)


def test_a_paste_too_large_for_the_context_is_tokenized_once(session: ModelSession) -> None:
    """Text whose bound is below the context (here: mostly spaces) but whose tokens are not."""
    history = _two_turns(session)
    work = _Work(session)
    paste = "ab  " * 3000  # 6000 non-space bytes: a bound of about 500 tokens, under the 508 free
    history.append({"role": "user", "content": paste})
    refused = _turn(session, history)
    assert isinstance(refused, Failed) and refused.kind == "context" and "context holds 512" in refused.message
    assert "at least" not in refused.message  # counted: the exact figure
    assert len(paste) <= sum(work.tokenized) < 2 * len(paste) and len(work.rendered) == 1
    _later_turns_never_look_at_it(session, work, history)


def test_a_session_tokenizes_as_llama_cpp_does_in_one_call(session: ModelSession) -> None:
    texts = ["", "hello", "<|im_start|>user\nhi<|im_end|>\n", "mixed ünïcödé ✓ text", "word " * 2000]
    for text in texts:
        data = text.encode("utf-8")
        for add_bos in (False, True):
            assert session.tokenize(text, add_bos=add_bos) == session.llm.tokenize(data, add_bos=add_bos, special=True)


def test_token_count_keys_and_memo() -> None:
    a = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"}]
    b = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "bc"}]
    c = [{"role": "assistant", "content": "ab"}, {"role": "assistant", "content": "c"}]
    keys = {messages_digest(m, "gguf") for m in (a, b, c)} | {messages_digest(a, "fallback:chatml")}
    assert len(keys) == 4
    assert messages_digest([dict(x) for x in a], "gguf") == messages_digest(a, "gguf")
    memo = TokenCounts(capacity=2)
    memo.put(b"1", 10)
    memo.put(b"2", 20)
    assert memo.get(b"1") == 10  # now the most recently used
    memo.put(b"3", 30)
    assert memo.get(b"2") is None and memo.get(b"1") == 10 and memo.get(b"3") == 30 and len(memo) == 2


def test_the_lower_bound_holds_for_the_rendered_prompt(session: ModelSession) -> None:
    longest = session.longest_token()
    assert longest is not None and longest >= len("<|im_start|>")
    rng = random.Random(5)
    alphabet = ["a", "b", "zq", " ", "  ", "\n", "\t", "é", "✓", "𝄞", "<|im_start|>", "<|im_end|>", "<s>", "0", "\u3000", "\x1c"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
        rendered = session.format.render(msgs)
        assert len(session.tokenize_prompt(rendered.text)) >= min_prompt_tokens(msgs, longest), text


def test_non_space_bytes_sees_whitespace_as_str_split_does() -> None:
    rng = random.Random(7)
    samples = ["", "a b", "".join(map(chr, range(128))) * 3, "é\u00a0ü\u3000x\u2028y", "\x1c\x1d\x1e\x1fz"]
    samples += ["".join(chr(rng.randint(0, 0x3100)) for _ in range(200)) for _ in range(50)]
    for text in samples:
        assert non_space_bytes(text) == len("".join(text.split()).encode("utf-8")), repr(text[:30])
