"""A prompt larger than the context: dropped turns (the window) or a refusal with the numbers (an API
request with keep_all_turns), and max_tokens beyond the context, on the real engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.context_policy import reply_reserve
from app.engine.client import EngineClient, Failure
from app.engine.request import ReplyRequest, Sampling
from tests.support.tiny_model import BOS_ID

pytestmark = pytest.mark.timeout(60)

T = 1  # one thread (see test_engine_host.py)
N_CTX = 256


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        assert client.load(tiny_gguf, n_ctx=N_CTX, n_threads=T).n_ctx == N_CTX
        yield client


def long_history(turns: int) -> list[dict]:
    history: list[dict] = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        history += [{"role": "user", "content": f"question {i} " * 3}, {"role": "assistant", "content": f"answer {i} " * 3}]
    history.append({"role": "user", "content": "latest"})
    return history


def test_keep_all_turns_refuses_what_the_window_would_trim_and_says_by_how_much(engine: EngineClient) -> None:
    history = long_history(12)
    trimmed = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=8), ignore_eos=True)).wait()
    assert trimmed.status == "length" and trimmed.metrics["dropped_turns"] > 0 and trimmed.failure is None

    refused = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=8), keep_all_turns=True)).wait()
    assert refused.status == "error" and refused.text == "" and refused.error_kind == "context"
    f = refused.failure
    assert isinstance(f, Failure) and f.kind == "context" and not f.at_least
    assert f.n_ctx == N_CTX and f.reserve == reply_reserve(8, N_CTX) == 8
    assert f.prompt_tokens is not None and f.prompt_tokens + f.reserve > N_CTX
    # The count is the whole prompt's: more than the trimmed prompt kept, by the dropped turns.
    assert f.prompt_tokens > trimmed.metrics["prompt_tokens"] + 20
    assert f"{f.prompt_tokens} tokens" in (refused.error or "") and "context holds 256" in (refused.error or "")
    assert refused.metrics["error_kind"] == "context"


def test_keep_all_turns_runs_a_prompt_that_fits_without_dropping(engine: EngineClient) -> None:
    history = long_history(2)
    fin = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), ignore_eos=True, keep_all_turns=True)).wait()
    assert fin.status == "length" and fin.failure is None and fin.error_kind is None
    assert fin.metrics["dropped_turns"] == 0 and fin.metrics["prompt_tokens"] > 30


def test_the_reserve_counts_in_the_refusal(engine: EngineClient) -> None:
    """A prompt that fits with a small reply reserve is refused with a larger one; the reserve is
    capped at a quarter of the context, however large max_tokens is."""
    history = [{"role": "user", "content": "ab " * 30}]  # (the tiny model, a base model, gets a few-shot transcript)
    small = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=1), keep_all_turns=True)).wait()
    assert small.failure is None, small.error
    n = small.metrics["prompt_tokens"]
    assert N_CTX - N_CTX // 4 < n < N_CTX - 1, n  # needs a reserve between 1 and a quarter of the context
    big = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=100_000), keep_all_turns=True)).wait()
    assert big.failure is not None and big.failure.kind == "context"
    assert big.failure.reserve == N_CTX // 4 and big.failure.prompt_tokens == n


def test_a_huge_paste_is_refused_by_its_lower_bound_without_counting_it(engine: EngineClient) -> None:
    fin = engine.generate(
        ReplyRequest.chat([{"role": "user", "content": "wordy " * 20_000}], sampling=Sampling(max_tokens=4), keep_all_turns=True)
    ).wait()
    f = fin.failure
    assert fin.status == "error" and f is not None and f.kind == "context" and f.at_least
    assert f.prompt_tokens is not None and f.prompt_tokens > N_CTX and "at least" in (fin.error or "")


def test_max_tokens_beyond_the_context_runs_to_the_context_end_with_length(engine: EngineClient) -> None:
    fin = engine.generate(
        ReplyRequest.chat(
            [{"role": "user", "content": "go"}], sampling=Sampling(max_tokens=1_000_000, seed=3), ignore_eos=True, keep_all_turns=True
        )
    ).wait()
    assert fin.status == "length" and fin.failure is None
    m = fin.metrics
    assert m["context_used"] == N_CTX and m["prompt_tokens"] + m["gen_tokens"] == N_CTX + 1  # the last is not evaluated
    after = engine.generate(
        ReplyRequest.chat([{"role": "user", "content": "again"}], sampling=Sampling(max_tokens=3), ignore_eos=True)
    ).wait()
    assert after.status == "length" and after.metrics["gen_tokens"] == 3


def test_raw_token_prompts_longer_than_the_context_carry_the_numbers(engine: EngineClient) -> None:
    fin = engine.generate(ReplyRequest.chat([], sampling=Sampling(max_tokens=2), prompt_tokens=[BOS_ID] + [10] * 300)).wait()
    f = fin.failure
    assert fin.status == "error" and f is not None and f.kind == "context"
    assert (f.prompt_tokens, f.n_ctx, f.reserve) == (301, N_CTX, 1)


def test_other_failures_name_their_kind_without_numbers(engine: EngineClient) -> None:
    fin = engine.generate(ReplyRequest.chat([], sampling=Sampling(max_tokens=2), prompt_tokens=[10**9])).wait()
    assert fin.status == "error" and fin.failure is not None and fin.failure.kind == "generate"
    assert fin.failure.prompt_tokens is None and fin.failure.n_ctx is None
