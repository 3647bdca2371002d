"""A fault-injecting HTTP proxy on 127.0.0.1 in front of a real OpenAI-compatible server, for
the remote-connection tests (Starlette + uvicorn + httpx, on a thread of the test process).

Requests go through to the upstream as they are, except POST .../chat/completions, which
gets the proxy's `mode` (the two redirect modes answer every request):
  pass      the upstream's reply, untouched
  drop      the first `after_events` events of the stream, then the connection is cut
            (no end of the chunked body)
  stall     the first `after_events` events, then nothing (the socket held open) until stopped
  status    answer `status` (429, 500, 503...) with an OpenAI-style error body and, when
            `retry_after` is set, a Retry-After header
  garbage   the whole stream, with unreadable lines (not JSON, not UTF-8, an unknown field)
            after each of the first `after_events` events
  huge      the first `after_events` events, then one line of `huge_bytes` with no line break
  length    a body that declares a Content-Length larger than what it sends: the first
            `after_events` events, then the connection ends
  length_short  a Content-Length 10 bytes short of the first `after_events` events, so the
            last of them is cut off inside a body that looks complete
  redirect  307 to the same path on a second listener at 127.0.0.2 (`elsewhere`), which
            records whether an Authorization header reached it
  redirect_same  307 to /same-origin/<path> on this proxy, which serves it as "pass"

`requests` records every request the proxy saw (path and headers).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.support.serve_fixture import free_port

# Lines a reader must skip: not JSON, not UTF-8, a field SSE does not have.
GARBAGE = b"data: {this is not json\n\n" + b"data: \xff\xfe not utf-8\n\n" + b"nonsense field\n\n"
_HOP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


class Cut(Exception):
    """Raised inside a streaming body: uvicorn then closes the connection mid-body."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    peer: str = ""  # the client's address and port: the same for requests on one kept-alive connection

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


@dataclass
class Listener:
    server: uvicorn.Server
    thread: threading.Thread
    url: str


def start_listener(app: Any, host: str) -> Listener:
    port = free_port() if host == "127.0.0.1" else _free_port_on(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="critical", lifespan="off", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name=f"fault-proxy-{host}")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the test listener on {host} did not start")
        time.sleep(0.01)
    return Listener(server, thread, f"http://{host}:{port}")


def _free_port_on(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Elsewhere:
    """The second listener (127.0.0.2): records what reached it and answers a short stream."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self._listener: Listener | None = None

    @property
    def url(self) -> str:
        assert self._listener is not None
        return self._listener.url

    async def _any(self, request: Request) -> Response:
        self.requests.append(Seen(request.url.path, {k.lower(): v for k, v in request.headers.items()}))
        body = b'data: {"choices":[{"index":0,"delta":{"content":"leaked"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        return Response(body, media_type="text/event-stream")

    def start(self) -> Elsewhere:
        app = Starlette(routes=[Route("/{path:path}", self._any, methods=["GET", "POST"])])
        self._listener = start_listener(app, "127.0.0.2")
        return self

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.server.should_exit = True
            self._listener.thread.join(10)


@dataclass
class FaultProxy:
    upstream: str  # the real server, http://127.0.0.1:PORT (no /v1)
    mode: str = "pass"
    after_events: int = 3
    status: int = 503
    message: str = "the model crashed: CUDA error: out of memory"
    retry_after: str | None = None
    huge_bytes: int = 2 << 20
    requests: list[Seen] = field(default_factory=list)
    elsewhere: Elsewhere = field(default_factory=Elsewhere)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _listener: Listener | None = None

    @property
    def url(self) -> str:
        assert self._listener is not None
        return self._listener.url

    def start(self) -> FaultProxy:
        app = Starlette(routes=[Route("/{path:path}", self._any, methods=["GET", "POST"])])
        self.elsewhere.start()
        self._listener = start_listener(app, "127.0.0.1")
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.server.should_exit = True
            self._listener.thread.join(10)
        self.elsewhere.stop()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the proxy ----------------------------------------------------------------------

    async def _any(self, request: Request) -> Response:
        path = request.url.path
        peer = f"{request.client.host}:{request.client.port}" if request.client else ""
        self.requests.append(Seen(path, {k.lower(): v for k, v in request.headers.items()}, peer))
        mode = self.mode
        if path.startswith("/same-origin/"):
            path, mode = path[len("/same-origin") :], "pass"
        if mode not in ("redirect", "redirect_same") and (request.method != "POST" or not path.endswith("/chat/completions")):
            mode = "pass"
        if mode == "status":
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return JSONResponse({"error": {"message": self.message, "type": "server_error"}}, status_code=self.status, headers=headers)
        if mode == "redirect":
            return Response(status_code=307, headers={"Location": f"{self.elsewhere.url}{path}"})
        if mode == "redirect_same":
            return Response(status_code=307, headers={"Location": f"/same-origin{path}"})
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0))
        upstream = await client.send(
            client.build_request(request.method, self.upstream + path, content=body, headers=headers, params=request.query_params),
            stream=True,
        )
        reply_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}

        async def close() -> None:
            await upstream.aclose()
            await client.aclose()

        if mode in ("length", "length_short"):
            return _LyingLength(
                self._events(upstream, close, limit=self.after_events), upstream.status_code, reply_headers, longer=mode == "length"
            )
        return StreamingResponse(self._stream(upstream, close, mode), status_code=upstream.status_code, headers=reply_headers)

    async def _events(self, upstream: httpx.Response, close: Any, limit: int | None = None) -> Any:
        """The upstream's body as whole events (each ending in a blank line)."""
        buffer, count = b"", 0
        try:
            async for chunk in upstream.aiter_raw():
                buffer += chunk.replace(b"\r\n", b"\n")
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    yield event + b"\n\n"
                    count += 1
                    if limit is not None and count >= limit:
                        return
            if buffer:
                yield buffer
        finally:
            await close()

    async def _stream(self, upstream: httpx.Response, close: Any, mode: str) -> Any:
        count = 0
        async for event in self._events(upstream, close):
            count += 1
            yield event
            if mode == "garbage":
                if count <= self.after_events:
                    yield GARBAGE
                continue
            if mode == "pass" or count != self.after_events:
                continue
            if mode == "drop":
                raise Cut("dropped mid-stream by the fault proxy")
            if mode == "huge":
                yield b"data: " + b"x" * self.huge_bytes
            if mode in ("stall", "huge"):
                while not self._stopping.is_set():
                    await asyncio.sleep(0.05)
                return


class _LyingLength(Response):
    """A body whose Content-Length lies. `longer`: it declares 5000 bytes more than it sends, then
    the connection ends; else it declares (and so sends) 10 bytes fewer than its events, so
    the last event is cut off inside a body that looks complete."""

    def __init__(self, events: Any, status: int, headers: dict[str, str], *, longer: bool) -> None:
        super().__init__(status_code=status, headers=headers)
        self._body_events = events
        self._longer = longer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b"".join([event async for event in self._body_events])
        headers = [(k, v) for k, v in self.raw_headers if k.lower() not in (b"content-length", b"transfer-encoding")]
        declared = len(body) + 5000 if self._longer else len(body) - 10
        headers.append((b"content-length", str(declared).encode()))
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        if not self._longer:
            await send({"type": "http.response.body", "body": body[:declared], "more_body": False})
            return
        await send({"type": "http.response.body", "body": body, "more_body": True})
        await asyncio.sleep(0.05)
        raise Cut("the body ended before its declared length")
