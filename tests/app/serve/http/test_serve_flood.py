"""The server's connections kept within bounds (app/serve/http/connections.py): idle connections past
the cap are closed to make room, a request's headers or body that never end are cut off, and a
well-behaved client is answered throughout. The server runs in this process on a thread, with
a cap and timeouts small enough for a test; bench/connection_flood.py floods a real `cove serve`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.serve.http.http import json_body
from app.serve.http.serving import CoveServer, listen_socket, make_server


async def _ok(_request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def _echo(request: Request) -> JSONResponse:
    from app.serve.http.errors import ApiError

    try:
        return JSONResponse({"got": await json_body(request, 1 << 20, timeout_s=1.0)})
    except ApiError as exc:
        return exc.response()


@contextmanager
def _serving(**options: float) -> Iterator[tuple[str, CoveServer]]:
    app = Starlette(routes=[Route("/ok", _ok), Route("/echo", _echo, methods=["POST"])])
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = make_server(app, lambda: None, **options)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def _closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:  # reset
        return True


def test_idle_connections_past_the_cap_make_room_and_a_good_client_is_answered() -> None:
    with _serving(max_connections=32, header_timeout_s=60, body_timeout_s=60) as (url, server):
        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(200)]
        try:
            for _ in range(5):  # each on a connection of its own, while 200 idle ones are held
                assert httpx.get(f"{url}/ok", timeout=10, headers={"connection": "close"}).json() == {"ok": True}
            closed = sum(_closed_by_server(s, 0.05) for s in idle[:100])
            assert closed >= 90  # the oldest idle connections were closed to make room
            assert len(server.guard.open) <= 32
        finally:
            for s in idle:
                s.close()


def test_headers_that_never_end_are_cut_off() -> None:
    with _serving(max_connections=64, header_timeout_s=0.5, body_timeout_s=60) as (url, _server):
        port = int(url.rsplit(":", 1)[1])
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        trickle = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            trickle.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for _ in range(3):  # a byte now and then never completes the headers
                time.sleep(0.4)
                trickle.sendall(b"X")
            assert _closed_by_server(silent, 15) and _closed_by_server(trickle, 15)
            assert httpx.get(f"{url}/ok", timeout=10).status_code == 200
        finally:
            silent.close()
            trickle.close()


def test_a_body_that_never_ends_is_a_408_with_a_sentence() -> None:
    with _serving(max_connections=64, header_timeout_s=5, body_timeout_s=60) as (url, _server):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
            sock.sendall(b'POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a": ')
            answer = b""
            while b"}}" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408")
        assert b"did not arrive within 1 s" in answer


def test_with_every_connection_busy_a_new_one_gets_a_json_503() -> None:
    with _serving(max_connections=16, header_timeout_s=60, body_timeout_s=60) as (url, _server):
        port = int(url.rsplit(":", 1)[1])
        busy = []
        for _ in range(16):  # each mid-body: a request in progress, never evicted
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[")
            busy.append(s)
        time.sleep(0.3)
        try:
            response = httpx.get(f"{url}/ok", timeout=10)
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "too_many_connections"
        finally:
            for s in busy:
                s.close()
