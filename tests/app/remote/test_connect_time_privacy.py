"""The private-network decision is made on the address actually connected to
(app/remote/checked_connect.py): a name that passed the check as private and resolves to a public
address when the connection is made gets nothing (no byte reaches any server, and the turn ends
with a sentence), while the same name resolving privately is connected to by that very address."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import app.remote.checked_connect as checked_connect
import app.remote.privacy as privacy
from app.engine.request import ReplyRequest, Sampling
from app.remote.checked_connect import CheckedBackend, PublicAddress
from app.remote.engine import RemoteEngine
from app.statuses import MessageStatus
from models.network import NetworkGate
from tests.app.remote.conftest import connection_to, model_on
from tests.support.fault_proxy import Listener, start_listener

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


@pytest.fixture
def server() -> Iterator[tuple[Listener, list[str]]]:
    seen: list[str] = []
    lock = threading.Lock()

    async def chat(request: Request) -> Response:
        with lock:
            seen.append(request.headers.get("host", ""))
        return Response(STREAM, media_type="text/event-stream")

    listener = start_listener(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]), "127.0.0.1")
    try:
        yield listener, seen
    finally:
        listener.server.should_exit = True
        listener.thread.join(10)


def _turn(port: int) -> tuple[MessageStatus | str, str]:
    connection = connection_to(f"http://gpu-box.test:{port}/v1")
    engine = RemoteEngine(connection, None, NetworkGate(environ={}))
    try:
        generation = engine.generate(
            ReplyRequest.chat([{"role": "user", "content": "a private question"}], sampling=Sampling(max_tokens=4)),
            model=model_on(connection),
        )
        events = list(generation)
    finally:
        engine.close()
    finished = generation.finished
    assert finished is not None, events
    return finished.status, finished.error or finished.text


def test_a_name_that_turns_public_between_the_check_and_the_connection_gets_nothing(
    server: tuple[Listener, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    listener, seen = server
    port = int(listener.url.rsplit(":", 1)[1])
    monkeypatch.setattr(privacy, "resolve", lambda name: ["127.0.0.1"])  # private when checked...
    monkeypatch.setattr(checked_connect, "resolve_for_connect", lambda host, p: ["203.0.113.9"])  # ...public when connected
    status, said = _turn(port)
    assert status == MessageStatus.ERROR and "now resolves to 203.0.113.9" in said and "nothing was sent" in said
    assert seen == []


def test_a_name_that_stays_private_is_connected_to_by_the_checked_address(
    server: tuple[Listener, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    listener, seen = server
    port = int(listener.url.rsplit(":", 1)[1])
    monkeypatch.setattr(privacy, "resolve", lambda name: ["127.0.0.1"])
    monkeypatch.setattr(checked_connect, "resolve_for_connect", lambda host, p: ["127.0.0.1"])
    status, said = _turn(port)
    assert status == MessageStatus.COMPLETE and said == "hello"
    assert seen == [f"gpu-box.test:{port}"]  # the name stays the Host; the address is the checked one


def test_the_backend_keeps_only_allowed_addresses() -> None:
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["203.0.113.9", "198.51.100.4"]

    with pytest.raises(PublicAddress) as refused:
        CheckedBackend(lambda: False, "box", resolver=resolve).connect_tcp("far.example", 8000, timeout=1)
    assert refused.value.connection == "box" and refused.value.addresses == ["203.0.113.9", "198.51.100.4"]
    assert asked == ["far.example"]
