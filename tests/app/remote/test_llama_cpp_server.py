"""Against llama-cpp-python's own OpenAI-compatible server on the tiny model: the probe knows
it, replies stream in as TokenEvents with Cove's own figures, Stop keeps the text, a key goes
in the Authorization header and a refused one is a sentence."""

from __future__ import annotations

import llama_cpp
import pytest

from app.engine.generation import FinishedEvent, TokenEvent
from app.engine.request import ReplyRequest, Sampling
from app.remote.errors import RemoteProblem
from app.remote.probe import probe
from app.statuses import MessageStatus
from models.network import NetworkActivity, NetworkGate
from tests.app.remote.conftest import SERVER_KEY, connection_to, engine_for, wait_idle
from tests.support.llama_cpp_server import LlamaCppServer

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
