"""Fixtures of the remote-connection tests: llama-cpp-python's own server on the tiny model
(once per session; one more that asks for a key), a fault proxy in front of it, and
connections and engines pointed at them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.remote.connections import Connection, host_of, normalise_url
from app.remote.engine import RemoteEngine
from app.remote.remote_model import RemoteModel
from models.network import NetworkGate
from tests.support.fault_proxy import FaultProxy, start_listener
from tests.support.llama_cpp_server import LlamaCppServer, llama_cpp_server

# A key no test output, file or sentence may ever show.
SERVER_KEY = "sk-CANARYremoteKey0123456789abcdef"


def connection_to(url: str, name: str = "box", *, ca_file: str | None = None, server: dict | None = None) -> Connection:
    base = normalise_url(url)
    return Connection(name, base, ca_file, host_of(base), server or {}, False, "")


def model_on(connection: Connection, model_id: str = "tiny", kind: str | None = "llama-cpp-python") -> RemoteModel:
    return RemoteModel(connection.name, model_id, connection.host, kind)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppServer]:
    with llama_cpp_server(tmp_path_factory.mktemp("llama-cpp-server")) as server:
        yield server


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppServer]:
    with llama_cpp_server(tmp_path_factory.mktemp("llama-cpp-server-keyed"), api_key=SERVER_KEY) as server:
        yield server


@pytest.fixture
def proxy(llama_server: LlamaCppServer) -> Iterator[FaultProxy]:
    with FaultProxy(llama_server.url) as running:
        yield running


@pytest.fixture
def gate() -> NetworkGate:
    return NetworkGate(environ={})


def engine_for(
    url: str, gate: NetworkGate, *, key: str | None = None, stall_timeout_s: float = 30.0, ca_file: str | None = None
) -> tuple[RemoteEngine, RemoteModel]:
    connection = connection_to(url, ca_file=ca_file)
    return RemoteEngine(connection, key, gate, stall_timeout_s=stall_timeout_s), model_on(connection)


def stand_in(routes: dict[str, Any]) -> Iterator[str]:
    """A stand-in server on 127.0.0.1 answering `routes` (path -> JSON body or Response), else 404;
    yields its URL once."""

    async def answer(request: Request) -> Response:
        body = routes.get(request.url.path)
        if body is None:
            return PlainTextResponse("Not Found", status_code=404)
        return body if isinstance(body, Response) else JSONResponse(body)

    listener = start_listener(Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])]), "127.0.0.1")
    try:
        yield listener.url
    finally:
        listener.server.should_exit = True
        listener.thread.join(10)


def wait_idle(gate: NetworkGate, timeout: float = 10.0) -> None:
    """Until no request is in flight through `gate` (or `timeout` passes; the caller asserts)."""
    deadline = time.monotonic() + timeout
    while gate.active() and time.monotonic() < deadline:
        time.sleep(0.01)
