"""Each fault of a server, injected by a proxy in front of the real llama-cpp-python server:
every one ends the reply with one sentence; after some text as "interrupted" with the text
kept, before any as "error". Redirects to another address are not followed, so the key never
travels."""

from __future__ import annotations

import pytest

from app.engine.generation import FinishedEvent, TokenEvent
from app.engine.request import ReplyRequest, Sampling
from app.remote.errors import RemoteProblem
from app.remote.probe import probe
from app.statuses import MessageStatus
from models.network import NetworkGate
from tests.app.remote.conftest import SERVER_KEY, connection_to, engine_for, wait_idle
from tests.support.fault_proxy import FaultProxy

HELLO = [{"role": "user", "content": "tell me a story"}]


def reply(
    proxy: FaultProxy, gate: NetworkGate, *, key: str | None = None, stall_timeout_s: float = 30.0, max_tokens: int = 24
) -> tuple[FinishedEvent, str]:
    """The reply through the proxy, and the text its TokenEvents carried."""
    engine, model = engine_for(proxy.url, gate, key=key, stall_timeout_s=stall_timeout_s)
    events = list(
        engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=max_tokens, temperature=0.0, seed=11)), model=model)
    )
    engine.close()
    final = events[-1]
    assert isinstance(final, FinishedEvent)
    return final, "".join(e.text for e in events if isinstance(e, TokenEvent))


def assert_interrupted(final: FinishedEvent, streamed: str, *words: str) -> None:
    assert final.status == MessageStatus.INTERRUPTED
    assert final.text and final.text == streamed  # the text so far is kept
    assert final.error is not None and final.error.endswith("the text so far is kept.")
    for word in words:
        assert word in final.error
    assert final.metrics["stop_reason"] == "interrupted" and final.metrics["gen_tokens"] >= 1


def test_the_whole_reply_passes_through_untouched_and_the_connection_is_kept(proxy: FaultProxy, gate: NetworkGate) -> None:
    final, streamed = reply(proxy, gate)
    assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and final.text == streamed
    engine, model = engine_for(proxy.url, gate)
    for _ in range(3):
        assert engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=6)), model=model).wait(30).text
        wait_idle(gate)  # the stream's end is read after the reply ended; then the connection is free
    engine.close()
    assert len({r.peer for r in proxy.requests[-3:]}) == 1  # one connection for the three replies


def test_a_stream_cut_mid_reply_keeps_the_text(proxy: FaultProxy, gate: NetworkGate) -> None:
    whole, _ = reply(proxy, gate)
    proxy.mode, proxy.after_events = "drop", 4
    final, streamed = reply(proxy, gate)
    host = proxy.url.removeprefix("http://")
    assert_interrupted(final, streamed, host, "closed the connection before the end of the reply")
    assert whole.text.startswith(final.text) and len(final.text) < len(whole.text)
    assert final.metrics["remote"]["fault"] == "cut"


def test_a_stream_cut_before_any_text_is_an_error(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode, proxy.after_events = "drop", 1  # only the first chunk, which names the role
    final, streamed = reply(proxy, gate)
    assert final.status == MessageStatus.ERROR and final.text == streamed == ""
    assert "closed the connection before the end of the reply" in (final.error or "")
    assert final.failure is not None and final.failure.kind == "remote-protocol"


def test_a_stalled_stream_stops_after_the_stall_timeout_and_keeps_the_text(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode, proxy.after_events = "stall", 4
    final, streamed = reply(proxy, gate, stall_timeout_s=0.5)
    assert_interrupted(final, streamed, "stopped sending for 0.5 seconds")
    assert final.metrics["remote"]["fault"] == "stall"
    proxy.after_events = 1
    before, _ = reply(proxy, gate, stall_timeout_s=0.5)
    assert before.status == MessageStatus.ERROR and "sent nothing for 0.5 seconds" in (before.error or "")


def test_stop_while_the_server_is_silent_ends_the_reply_at_once(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode, proxy.after_events = "stall", 4
    engine, model = engine_for(proxy.url, gate, stall_timeout_s=600)
    generation = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=24, temperature=0.0, seed=11)), model=model)
    assert not generation.done  # generate() returned without waiting for the reply
    received = []
    for event in generation:
        if isinstance(event, TokenEvent):
            received.append(event.text)
            if len(received) == 2:  # the proxy sends no more after these: the read is blocked
                generation.cancel()
    final = generation.wait(0)
    assert final.status == MessageStatus.CANCELLED and final.text == "".join(received)
    wait_idle(gate)  # the blocked read returned and the request ended (its socket was shut down)
    assert gate.active() == []
    engine.close()


@pytest.mark.parametrize("retry_after", ["7", None])
def test_a_busy_server_says_so_and_when_to_try_again(proxy: FaultProxy, gate: NetworkGate, retry_after: str | None) -> None:
    proxy.mode, proxy.status, proxy.message, proxy.retry_after = "status", 429, "too many requests in flight", retry_after
    final, _ = reply(proxy, gate)
    assert final.status == MessageStatus.ERROR and final.text == ""
    assert "is busy (HTTP 429)" in (final.error or "") and "too many requests in flight" in (final.error or "")
    if retry_after:
        assert "wait 7 seconds" in (final.error or "") and final.metrics["retry_after_s"] == 7.0
    else:
        assert "try again in a moment" in (final.error or "") and "retry_after_s" not in final.metrics
    assert final.failure is not None and final.failure.kind == "remote-busy"


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_quotes_the_server_trimmed_and_without_the_key(proxy: FaultProxy, gate: NetworkGate, status: int) -> None:
    proxy.mode, proxy.status = "status", status
    proxy.message = f"CUDA error: out of memory (request had Bearer {SERVER_KEY}) " + "detail " * 100
    final, _ = reply(proxy, gate, key=SERVER_KEY)
    assert final.status == MessageStatus.ERROR
    error = final.error or ""
    assert f"failed to answer (HTTP {status})" in error and "CUDA error: out of memory" in error
    assert SERVER_KEY not in error and "[key]" in error and len(error) < 400
    assert proxy.requests[-1].authorization == f"Bearer {SERVER_KEY}"  # it went to the connection's own host


def test_garbage_lines_are_skipped_and_nothing_is_lost(proxy: FaultProxy, gate: NetworkGate) -> None:
    clean, _ = reply(proxy, gate)
    proxy.mode, proxy.after_events = "garbage", 6
    final, streamed = reply(proxy, gate)
    assert final.status == clean.status and final.text == clean.text == streamed and final.error is None
    assert final.metrics["remote"]["unreadable_events"] >= 6 * 3


def test_a_huge_chunk_ends_the_stream_and_keeps_the_text(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode, proxy.after_events = "huge", 4
    final, streamed = reply(proxy, gate)
    assert_interrupted(final, streamed, "a line of more than 1 MiB")
    assert final.metrics["remote"]["fault"] == "too_large"


@pytest.mark.parametrize("mode", ["length", "length_short"])
def test_a_body_that_lies_about_its_length_keeps_the_text(proxy: FaultProxy, gate: NetworkGate, mode: str) -> None:
    proxy.mode, proxy.after_events = mode, 5
    final, streamed = reply(proxy, gate)
    if mode == "length":  # declared more than it sent, then the connection ended
        assert_interrupted(final, streamed, "closed the connection before the end of the reply")
    else:  # a body that looks complete ends inside an event
        assert_interrupted(final, streamed, "ended the stream before the reply finished")


def test_a_redirect_to_another_host_is_not_followed_and_the_key_stays_home(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode = "redirect"
    final, _ = reply(proxy, gate, key=SERVER_KEY)
    assert final.status == MessageStatus.ERROR and final.failure is not None and final.failure.kind == "remote-redirect"
    assert "127.0.0.2" in (final.error or "") and "did not follow it" in (final.error or "")
    with pytest.raises(RemoteProblem) as probed:
        probe(connection_to(proxy.url), SERVER_KEY, gate)
    assert probed.value.kind == "redirect" and SERVER_KEY not in str(probed.value)
    assert proxy.requests and all(r.authorization == f"Bearer {SERVER_KEY}" for r in proxy.requests)
    assert not any(r.authorization for r in proxy.elsewhere.requests)  # the key never reached 127.0.0.2
    assert proxy.elsewhere.requests == []  # nor did the messages


def test_a_redirect_within_the_server_is_followed(proxy: FaultProxy, gate: NetworkGate) -> None:
    proxy.mode = "redirect_same"
    final, streamed = reply(proxy, gate, key=SERVER_KEY)
    assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and final.text == streamed != ""
    paths = [r.path for r in proxy.requests]
    assert paths == ["/v1/chat/completions", "/same-origin/v1/chat/completions"]
    assert all(r.authorization == f"Bearer {SERVER_KEY}" for r in proxy.requests)
    assert proxy.elsewhere.requests == []
