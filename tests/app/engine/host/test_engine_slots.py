"""Slots: one engine process decodes several replies together (app/engine/host/scheduler.py), on the
tiny random-weight GGUF. Every check counts events or compares text; none measures time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient, EngineError, FinishedEvent, Generation, TokenEvent
from app.engine.host.scheduler import WINDOW_SHARE, WindowFirst
from app.engine.request import ReplyRequest, Sampling

pytestmark = pytest.mark.timeout(120)

T = 1  # one thread: on a busy 2-core machine a 2-thread run can be far slower (test_engine_host.py)
N_CTX = 512


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def greedy(engine: EngineClient, text: str, n: int = 24, **kw: object) -> Generation:
    return engine.generate(
        ReplyRequest.chat(user(text), sampling=Sampling(max_tokens=n, temperature=0.0), ignore_eos=True, no_cache=True, **kw)
    )


@pytest.fixture(scope="module")
def engine(tiny_gguf_with_template: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf_with_template, n_threads=T, n_ctx=N_CTX, parallel=4, state_cache_mb=0)
        yield client


PROMPTS = ["the first question", "a second, longer question about birds", "three", "and a fourth one here"]


@pytest.mark.parametrize("together", [2, 4])
def test_replies_decoded_together_are_the_replies_each_gives_alone(engine: EngineClient, together: int) -> None:
    alone = [greedy(engine, p).wait(60).text for p in PROMPTS[:together]]
    gens = [greedy(engine, p) for p in PROMPTS[:together]]
    ends = [g.wait(60) for g in gens]
    assert all(e.status == "length" and e.metrics["gen_tokens"] == 24 for e in ends)
    assert max(e.metrics["batch"]["max_sequences"] for e in ends) >= 2  # they did share steps
    # llama.cpp's batched kernels may round differently from single-token decoding; on this model the
    # replies match exactly (a divergence would show as a near-tie, as in test_engine_speculative.py).
    assert [e.text for e in ends] == alone


def test_loaded_reports_its_slots_and_one_context_each(engine: EngineClient) -> None:
    loaded = engine.loaded
    assert loaded is not None and loaded.slots == 4 and loaded.n_ctx == N_CTX


def test_cancelling_one_of_four_leaves_the_others_whole(engine: EngineClient) -> None:
    gens = [greedy(engine, p, n=60) for p in PROMPTS]
    victim = gens[1]
    got = 0
    for event in victim:
        if isinstance(event, TokenEvent) and event.text:
            got += 1
            if got == 3:
                victim.cancel()
        if isinstance(event, FinishedEvent):
            break
    ends = [g.wait(60) for g in gens]
    assert ends[1].status == "cancelled" and 0 < ends[1].metrics["gen_tokens"] < 60
    for i in (0, 2, 3):
        assert ends[i].status == "length" and ends[i].metrics["gen_tokens"] == 60


def test_a_reply_under_a_grammar_beside_free_ones(engine: EngineClient) -> None:
    free = [greedy(engine, p, n=30) for p in PROMPTS[:3]]
    bound = engine.generate(
        ReplyRequest.chat(
            user("yes or no?"), sampling=Sampling(max_tokens=30, temperature=0.8, seed=4), grammar='root ::= ("yes" | "no") "."'
        )
    )
    fin = bound.wait(60)
    assert fin.status == "complete" and fin.text in ("yes.", "no.")
    assert all(g.wait(60).metrics["gen_tokens"] == 30 for g in free)


def test_a_long_prompt_is_read_between_the_steps_of_streaming_replies(engine: EngineClient) -> None:
    streams = [greedy(engine, p, n=300) for p in PROMPTS[:3]]
    for g in streams:  # all three are decoding
        while not any(isinstance(e, TokenEvent) and e.text for e in [next(g)]):
            pass
    before = [len(g.text) for g in streams]
    paste = engine.generate(ReplyRequest.chat(user("word " * 110), sampling=Sampling(max_tokens=2, temperature=0.0), no_cache=True))
    first = next(iter(paste))  # its first token comes once its whole prompt has been read
    assert isinstance(first, (TokenEvent, FinishedEvent))
    grown = [len(g.text) - b for g, b in zip(streams, before, strict=True)]
    fin = paste.wait(60)
    assert fin.status == "length" and fin.metrics["prompt_tokens"] > 2 * 128
    # the paste was read in chunks of 128 with the others' tokens in between, not in one go
    assert all(n > 0 for n in grown), grown
    assert all(g.wait(60).status == "length" for g in streams)


def test_a_conversation_goes_back_to_the_slot_that_holds_its_tokens(engine: EngineClient) -> None:
    history = [{"role": "user", "content": "tell me about the harbour"}]
    one = engine.generate(
        ReplyRequest.chat(history, sampling=Sampling(max_tokens=8, temperature=0.0), conversation_id="harbour", ignore_eos=True)
    ).wait(60)
    others = [
        engine.generate(ReplyRequest.chat(user(p), sampling=Sampling(max_tokens=8), conversation_id=f"other{i}", ignore_eos=True))
        for i, p in enumerate(PROMPTS[:2])
    ]
    [g.wait(60) for g in others]
    history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "and the boats?"}]
    two = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=8), conversation_id="harbour", ignore_eos=True)).wait(60)
    assert two.metrics["batch"]["slot"] == one.metrics["batch"]["slot"]
    assert two.metrics["cached_tokens"] == one.metrics["context_used"]  # every cell of the first turn kept
    assert two.metrics["state_cache"]["enabled"] is False  # the slot kept them, not a saved state


def test_serving_says_how_many_replies_the_engine_decodes(engine: EngineClient) -> None:
    gens = [greedy(engine, p, n=400) for p in PROMPTS[:3]]
    seen = 0
    for event in gens[0]:
        seen = max(seen, engine.serving().sequences)
        if seen >= 3 or isinstance(event, FinishedEvent):
            break
    assert seen == 3 and engine.serving().slots == 4
    engine.cancel()
    assert all(g.wait(60).status == "cancelled" for g in gens)


def test_more_requests_than_slots_wait_and_all_finish(engine: EngineClient) -> None:
    gens = [greedy(engine, f"request {i}", n=6) for i in range(7)]
    ends = [g.wait(60) for g in gens]
    assert [e.status for e in ends] == ["length"] * 7
    assert {e.metrics["batch"]["slot"] for e in ends} <= {0, 1, 2, 3}


def test_the_windows_reply_goes_on_while_api_replies_stream(engine: EngineClient) -> None:
    api = [greedy(engine, p, n=300) for p in PROMPTS[:3]]
    for g in api:
        next(g)
    window = engine.generate(
        ReplyRequest.chat(
            user("the window asks"),
            sampling=Sampling(max_tokens=40, temperature=0.0),
            conversation_id="w",
            ignore_eos=True,
            priority="window",
        )
    ).wait(60)
    still = [not g.done for g in api]
    engine.cancel()
    assert window.status == "length" and window.metrics["gen_tokens"] == 40
    assert window.metrics["batch"]["max_sequences"] >= 2 and any(still)


def test_window_first_lets_api_work_into_its_steps_only_as_far_as_its_share() -> None:
    first = WindowFirst()
    alone, shared = 0.010, 0.040  # a step with the window alone, and with three API replies too
    steps = shared_steps = 0
    elapsed = 0.0
    for _ in range(2000):
        together = first.allow()
        first.record(shared if together else alone, shared=together)
        steps += 1
        shared_steps += together
        elapsed += shared if together else alone
    assert 0 < shared_steps < steps
    window_rate, rate_alone = steps / elapsed, 1 / alone
    assert window_rate >= rate_alone / (1 + WINDOW_SHARE) * 0.99
    free = WindowFirst()  # when sharing costs the window nothing, the API replies are in every step
    for _ in range(50):
        together = free.allow()
        free.record(alone, shared=together)
    assert free.allow()


def test_saved_state_is_restored_into_a_slot(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_threads=T, n_ctx=N_CTX, parallel=2, state_cache_mb=64)
        history = [{"role": "user", "content": "a conversation worth keeping " * 6}]
        one = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=6), conversation_id="kept", ignore_eos=True)).wait(60)
        # two other conversations take both slots, so the first one's cells are gone from them
        for i in range(2):
            pair = [
                engine.generate(
                    ReplyRequest.chat(
                        user(f"other {i} {j} " * 8), sampling=Sampling(max_tokens=4), conversation_id=f"o{i}{j}", ignore_eos=True
                    )
                )
                for j in range(2)
            ]
            [g.wait(60) for g in pair]
        history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "more"}]
        two = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), conversation_id="kept", ignore_eos=True)).wait(60)
        assert two.metrics["state_cache"]["hit"] is True
        assert two.metrics["cached_tokens"] >= one.metrics["prompt_tokens"]


def test_a_load_of_the_loaded_model_while_replies_stream_keeps_the_engine(
    engine: EngineClient, tiny_gguf_with_template: Path, tiny_gguf: Path
) -> None:
    """The window's turn asks for its model while API replies run on the same engine: it shares it."""
    gen = greedy(engine, "streaming on", n=400)
    next(gen)
    pid = engine.host_pid
    same = engine.load(tiny_gguf_with_template, n_threads=T, n_ctx=N_CTX, parallel=4, state_cache_mb=0)
    fewer = engine.load(tiny_gguf_with_template, n_threads=T, n_ctx=N_CTX, parallel=1, state_cache_mb=0)
    assert same is fewer and same.slots == 4 and engine.host_pid == pid
    with pytest.raises(EngineError, match="still being generated"):
        engine.load(tiny_gguf, n_threads=T, n_ctx=N_CTX, parallel=4, state_cache_mb=0)
    gen.cancel()
    assert gen.wait(60).status == "cancelled"


def test_a_reply_that_ends_and_saves_its_state_leaves_the_others_their_tokens(tiny_gguf_with_template: Path) -> None:
    """Saving an ended reply's state decodes a batch of its own; the replies that shared its step
    have taken their tokens from the step's logits before that."""
    with EngineClient() as engine:
        engine.load(tiny_gguf_with_template, n_threads=T, n_ctx=N_CTX, parallel=4, state_cache_mb=64)
        gens = [
            engine.generate(
                ReplyRequest.chat(
                    user(f"conversation {i}"),
                    sampling=Sampling(max_tokens=5 + 7 * i, temperature=0.0),
                    conversation_id=f"c{i}",
                    ignore_eos=True,
                )
            )
            for i in range(4)
        ]
        ends = [g.wait(60) for g in gens]
        assert [e.error for e in ends] == [None] * 4
        assert [e.metrics["gen_tokens"] for e in ends] == [5, 12, 19, 26]


def test_an_engine_killed_mid_batch_ends_every_reply_with_its_text_and_the_next_starts_it_again(tiny_gguf_with_template: Path) -> None:
    import os
    import signal

    with EngineClient() as engine:
        engine.load(tiny_gguf_with_template, n_threads=T, n_ctx=N_CTX, parallel=3, state_cache_mb=0)
        gens = [greedy(engine, p, n=400) for p in PROMPTS[:3]]
        for g in gens:  # every one has text on its way
            while not g.text:
                next(g)
        pid = engine.host_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        ends = [g.wait(60) for g in gens]
        assert [e.status for e in ends] == ["error"] * 3
        assert all(e.text and "stopped unexpectedly" in (e.error or "") for e in ends)
        again = greedy(engine, "after the crash", n=4).wait(60)
        assert again.status == "length" and engine.host_pid not in (None, pid)


def test_a_reply_says_where_its_token_loop_spent_its_time_outside_decoding(engine: EngineClient) -> None:
    """Picking, accepting (detokenizing, stops) and its share of the pipe writes, for `cove bench`'s
    parts; each is a real, positive time and together less than the reply's whole time."""
    end = greedy(engine, "the first question").wait(60)
    loop = end.metrics["token_loop"]
    assert loop["pick_ms"] > 0 and loop["accept_ms"] > 0 and loop["send_ms"] > 0
    assert sum(loop.values()) < end.metrics["prefill_ms"] + end.metrics["gen_ms"]
