"""Against llama-cpp-python's own OpenAI-compatible server on the tiny model: the probe knows
it, replies stream in as TokenEvents with Cove's own figures, Stop keeps the text, a key goes
in the Authorization header and a refused one is a sentence."""

from __future__ import annotations

import threading

import httpx
import llama_cpp
import pytest

from app.engine.generation import FinishedEvent, TokenEvent
from app.engine.request import ReplyRequest, Sampling
from app.remote.errors import RemoteProblem
from app.remote.probe import ServerInfo, probe
from app.remote.reachability import probe_many
from app.statuses import MessageStatus
from models.network import NetworkActivity, NetworkGate
from tests.app.remote.conftest import SERVER_KEY, connection_to, engine_for, wait_idle
from tests.support.llama_cpp_server import LlamaCppServer
from tests.support.tiny_model import EOS_ID

HELLO = [{"role": "user", "content": "hello there"}]


def watch(gate: NetworkGate) -> list[tuple[str, str, bool]]:
    seen: list[tuple[str, str, bool]] = []

    def listener(activity: NetworkActivity, started: bool) -> None:
        seen.append((activity.kind, activity.host, started))

    gate.add_listener(listener)
    return seen


def test_probe_knows_llama_cpp_python_and_lists_its_model(llama_server: LlamaCppServer, gate: NetworkGate) -> None:
    seen = watch(gate)
    connection = connection_to(llama_server.url)
    info = probe(connection, None, gate)
    assert info.kind == "llama-cpp-python"
    assert info.version == llama_cpp.__version__
    assert [m["id"] for m in info.models] == [llama_server.model]
    assert info.private is True
    assert seen and all(kind == "remote-models" and host == connection.host for kind, host, _ in seen)
    assert gate.active() == []


def test_a_streamed_reply_arrives_as_token_events_with_cove_s_figures(llama_server: LlamaCppServer, gate: NetworkGate) -> None:
    seen = watch(gate)
    engine, model = engine_for(llama_server.url, gate)
    generation = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=24, temperature=0.0, seed=7)), model=model)
    events = list(generation)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    final = events[-1]
    assert isinstance(final, FinishedEvent) and all(isinstance(e, TokenEvent) for e in events[:-1])
    assert len(tokens) >= 2 and final.text == "".join(t.text for t in tokens) and final.text
    assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and final.error is None
    m = final.metrics
    assert m["ttft_ms"] > 0 and m["turn_ms"] >= m["ttft_ms"]
    assert 2 <= m["gen_tokens"] <= 24 and m["gen_tps"] > 0
    assert m["stop_reason"] in ("length", "stop")
    assert m["remote"] == {
        "connection": "box",
        "host": engine.connection.host,
        "kind": "llama-cpp-python",
        "model_id": "tiny",
        "fingerprint": None,
        "server_usage": None,
        "server_timings": None,
    }
    wait_idle(gate)
    assert ("remote", engine.connection.host, True) in seen and ("remote", engine.connection.host, False) in seen
    # the same request at temperature 0 gives the same text: nothing was lost or doubled on the way
    again = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=24, temperature=0.0, seed=7)), model=model).wait(30)
    assert again.text == final.text
    engine.close()


def test_stop_mid_reply_keeps_the_text_and_closes_the_stream(llama_server: LlamaCppServer, gate: NetworkGate) -> None:
    engine, model = engine_for(llama_server.url, gate)
    # (100 tokens: longer replies from this server wait for its 15 s keep-alive now and then)
    generation = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=100, temperature=0.0, seed=3)), model=model)
    received: list[str] = []
    for event in generation:
        if isinstance(event, TokenEvent):
            received.append(event.text)
            if len(received) == 3:
                generation.cancel()
            continue
        final = event
    assert final.status == MessageStatus.CANCELLED and final.error is None
    # Tokens the stream thread had queued before the cancel still come out (a busy machine reads
    # them late); the reply is what was received, and it ended long before its 100 tokens.
    assert final.text == "".join(received) and 3 <= len(received) < 100
    assert final.metrics["stop_reason"] == "cancelled" and final.metrics["gen_tokens"] >= 3
    wait_idle(gate)
    assert gate.active() == []  # the stream's request is over, not reading on in the background
    # the server is free again: the next reply streams at once
    assert engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=4)), model=model).wait(30).status in (
        MessageStatus.LENGTH,
        MessageStatus.COMPLETE,
    )
    engine.close()


def test_the_key_goes_as_a_bearer_and_a_wrong_or_missing_one_is_a_sentence(keyed_server: LlamaCppServer, gate: NetworkGate) -> None:
    connection = connection_to(keyed_server.url)
    with pytest.raises(RemoteProblem) as missing:
        probe(connection, None, gate)
    assert missing.value.kind == "auth" and "asks for a key" in str(missing.value) and connection.host in str(missing.value)
    wrong = "sk-wrong-" + SERVER_KEY[::-1]
    with pytest.raises(RemoteProblem) as refused:
        probe(connection, wrong, gate)
    assert refused.value.kind == "auth" and "refused the key" in str(refused.value)
    assert wrong not in str(refused.value) and SERVER_KEY not in str(refused.value)
    assert probe(connection, SERVER_KEY, gate).kind == "llama-cpp-python"

    engine, model = engine_for(keyed_server.url, gate, key=wrong)
    failed = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=4)), model=model).wait(30)
    assert failed.status == MessageStatus.ERROR and failed.text == "" and "refused the key" in (failed.error or "")
    assert failed.failure is not None and failed.failure.kind == "remote-auth"
    assert wrong not in repr(failed) and wrong not in repr(engine.http)
    engine, model = engine_for(keyed_server.url, gate, key=SERVER_KEY)
    done = engine.generate(ReplyRequest.chat(HELLO, sampling=Sampling(max_tokens=6)), model=model).wait(30)
    assert done.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and done.text
    engine.close()


def _long_reply(engine, model):
    """A reply of 200 tokens (the tiny model's </s> biased away): this server sends the first token
    at once and the rest seconds later, so the reply still streams after its first piece."""
    sampling = Sampling(max_tokens=200, temperature=0.0, seed=3, logit_bias=((EOS_ID, -100.0),))
    return engine.generate(ReplyRequest.chat(HELLO, sampling=sampling), model=model)


def test_a_reply_the_server_stops_for_another_request_is_interrupted_not_complete(llama_server: LlamaCppServer, gate: NetworkGate) -> None:
    """llama-cpp-python's server ends a streaming reply with a bare [DONE] (no finish_reason) when
    another request waits for its model: here a GET /v1/models from another program."""
    engine, model = engine_for(llama_server.url, gate)
    generation = _long_reply(engine, model)
    listing: list[int] = []
    asker = threading.Thread(target=lambda: listing.append(httpx.get(f"{llama_server.url}/v1/models", timeout=60).status_code))
    pieces = 0
    for event in generation:
        if isinstance(event, TokenEvent):
            pieces += 1
            if pieces == 1:
                asker.start()
            continue
        final = event
    asker.join(60)
    assert listing == [200]
    assert final.status == MessageStatus.INTERRUPTED and final.text, (final.status, final.metrics)
    assert final.error is not None and "ended the reply without saying it was finished" in final.error
    assert final.error.endswith("the text so far is kept.")
    assert final.metrics["gen_tokens"] < 200
    engine.close()


def test_asking_whether_the_server_answers_does_not_stop_its_reply(llama_server: LlamaCppServer, gate: NetworkGate) -> None:
    """The window's and placement's reachability question (probe_many) asks a server last seen as
    llama-cpp-python's where it takes no lock, so a reply streaming from it runs to its end."""
    known = probe(connection_to(llama_server.url), None, gate)
    connection = connection_to(llama_server.url, server={"kind": known.kind, "version": known.version, "models": known.models})
    engine, model = engine_for(llama_server.url, gate)
    generation = _long_reply(engine, model)
    answers: dict = {}
    pieces = 0
    for event in generation:
        if isinstance(event, TokenEvent):
            pieces += 1
            if pieces == 1:
                answers = probe_many([(connection, None)], gate)
                assert not generation.done  # asked while the reply streams
            continue
        final = event
    (answer,) = answers.values()
    assert isinstance(answer, ServerInfo) and answer.kind == "llama-cpp-python" and answer.models == known.models
    assert final.status == MessageStatus.LENGTH and final.error is None, (final.status, final.error)  # to its limit: the context
    engine.close()
