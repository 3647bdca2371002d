"""Reaching the server: a closed port or a server that never answers is a sentence naming the
host and why, within the connect timeout (5 s unless told); offline mode refuses before any
socket opens; the environment's proxy settings are not used (the key goes to the server only)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from app.engine.request import ReplyRequest, Sampling
from app.remote.errors import RemoteProblem
from app.remote.probe import ServerInfo, probe
from app.remote.reachability import probe_many
from app.statuses import MessageStatus
from models.network import NetworkGate, NetworkRefused
from tests.app.remote.conftest import SERVER_KEY, connection_to, engine_for, stand_in
from tests.support.fault_proxy import Elsewhere
from tests.support.llama_cpp_server import LlamaCppServer


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A socket that listens and never accepts; `accepted()` tells whether anyone connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    server.setblocking(False)
    yield server
    server.close()


def connected_to(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_is_a_sentence_at_once(gate: NetworkGate) -> None:
    port = closed_port()
    engine, model = engine_for(f"http://127.0.0.1:{port}", gate)
    final = engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model).wait(10)
    assert final.status == MessageStatus.ERROR and final.text == ""
    assert final.error == (
        f"127.0.0.1:{port} refused the connection: nothing is listening on port {port} there (is the server running, and on that port?)."
    )
    assert final.failure is not None and final.failure.kind == "remote-unreachable"
    with pytest.raises(RemoteProblem) as probed:
        probe(connection_to(f"http://127.0.0.1:{port}"), None, gate)
    assert probed.value.kind == "unreachable" and str(probed.value) == final.error


def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout(listening: socket.socket, gate: NetworkGate) -> None:
    port = listening.getsockname()[1]
    fillers = []  # fill the listen queue, so the next connection attempt gets no answer at all
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        with pytest.raises(RemoteProblem) as probed:
            probe(connection_to(f"http://127.0.0.1:{port}"), None, gate, connect_timeout_s=0.3)
        assert probed.value.kind == "unreachable"
        assert str(probed.value).startswith(f"127.0.0.1:{port} did not answer within 0.3 seconds")
    finally:
        for filler in fillers:
            filler.close()
    engine, _ = engine_for("http://127.0.0.1:1", gate)
    assert engine.connect_timeout_s == 5.0 and engine.http.client().timeout.connect == 5.0


def test_offline_refuses_before_any_socket(listening: socket.socket) -> None:
    url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    gate = NetworkGate(offline=True)
    engine, model = engine_for(url, gate)
    with pytest.raises(NetworkRefused):
        engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model)
    with pytest.raises(RemoteProblem) as probed:
        probe(connection_to(url), None, gate)
    assert probed.value.kind == "offline" and "listing your server's models" in str(probed.value)
    assert not connected_to(listening)


def test_the_environment_s_proxy_is_not_used(llama_server: LlamaCppServer, gate: NetworkGate, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = Elsewhere().start()
    try:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "HTTPS_PROXY"):
            monkeypatch.setenv(name, elsewhere.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert probe(connection_to(llama_server.url), SERVER_KEY, gate).kind == "llama-cpp-python"
        engine, model = engine_for(llama_server.url, gate, key=SERVER_KEY)
        assert (
            engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model)
            .wait(30)
            .text
        )
        engine.close()
        assert elsewhere.requests == []
    finally:
        elsewhere.stop()


def test_a_server_no_longer_llama_cpp_python_is_asked_in_full(gate: NetworkGate) -> None:
    """A connection last seen as llama-cpp-python's, where another server answers now: the quiet
    question finds no such server there, so what it lists now is asked and kept."""
    last = {"kind": "llama-cpp-python", "version": "0.3.1", "models": [{"id": "old", "fingerprint": None, "context_length": None}]}
    for url in stand_in({"/v1/models": {"object": "list", "data": [{"id": "new-model", "object": "model"}]}}):
        answers = probe_many(
            [(connection_to(url, server=last), None), (connection_to("http://127.0.0.1:9/v1", name="gone", server=last), None)], gate
        )
    answer = answers["box"]
    assert isinstance(answer, ServerInfo) and answer.kind == "openai-compatible" and [m["id"] for m in answer.models] == ["new-model"]
    assert isinstance(answers["gone"], RemoteProblem) and "127.0.0.1:9" in str(answers["gone"])
