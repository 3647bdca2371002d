"""How uvicorn runs the API server, for `cove serve` and the window's Server switch: the listening
socket (a taken port is a sentence), HTTPS when given a TLS context (off loopback,
app/serve/http/tls.py), the connections' bounds (app/serve/http/connections.py), and
stopping: the first SIGINT/SIGTERM/SIGHUP, or `should_exit`, cancels the replies in progress
(Service.stop_all: each ends within a token, recorded with what it wrote, its client told), so
the server is gone within STOP_GRACE_S plus the engines' own stop, not when the longest reply
would have ended."""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from app.serve.http.connections import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, ConnectionGuard, connection_cap, raise_open_file_limit
from app.serve.http.nodelay import http_protocol

STOP_GRACE_S = 1  # after the replies were cancelled: how long their last chunks may take, then their tasks are cancelled
BACKLOG = 2048


class ListenError(Exception):
    """The server cannot listen where it was asked to; the message is a sentence."""


def url_host(host: str) -> str:
    """`host` as it goes in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket listening on host:port, or ListenError saying why not."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    if ip is not None:  # an address as it is: no lookup at all (a name is looked up, e.g. in /etc/hosts)
        family, kind, proto = (socket.AF_INET6 if ip.version == 6 else socket.AF_INET), socket.SOCK_STREAM, 0
        address: tuple[Any, ...] = (str(ip), port, 0, 0) if ip.version == 6 else (str(ip), port)
    else:
        try:
            family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        except (socket.gaierror, UnicodeError) as exc:
            raise ListenError(f"cannot listen on {host!r}: {getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(f"port {port} on {host} is in use (is cove serve running already?)") from None
        raise ListenError(f"could not listen on {url_host(host)}:{port}: {exc.strerror or exc}") from None
    return sock


class CoveServer(uvicorn.Server):
    """uvicorn's server with the connection guard running, and a stop that does not wait for
    replies to end on their own."""

    def __init__(
        self, config: uvicorn.Config, guard: ConnectionGuard, stop_replies: Callable[[], None], tls: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(config)
        self.guard, self._stop_replies, self._stopped_replies, self.tls = guard, stop_replies, False, tls

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Runs in the signal handler: only flags here. A second signal changes nothing: the stop
        # is already bounded (uvicorn's force_exit would skip the engines' stop and leave tasks
        # for asyncio.run to cancel, each a CancelledError traceback).
        if sig not in self._captured_signals:
            self._captured_signals.append(sig)
        self.should_exit = True

    async def on_tick(self, counter: int) -> bool:
        if self.should_exit and not self._stopped_replies:
            self._stopped_replies = True
            self._stop_replies()
        return await super().on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        import asyncio

        self.guard.start(asyncio.get_running_loop())
        if self.tls is not None:
            # Cove's own context (app/serve/http/tls.py: its certificate, TLS 1.2 at least) in place
            # of one uvicorn would make from files; uvicorn wraps every accepted connection in it.
            if not self.config.loaded:
                self.config.load()
            self.config.ssl = self.tls
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if not self._stopped_replies:
            self._stopped_replies = True
            self._stop_replies()
        try:
            await super().shutdown(sockets)
        finally:
            self.guard.stop()


def make_server(
    app: Any,
    stop_replies: Callable[[], None],
    *,
    max_connections: int | None = None,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
) -> CoveServer:
    """The server for `app`, its open-file limit raised and its connections capped to fit; with
    `tls`, it speaks HTTPS only."""
    cap = connection_cap(raise_open_file_limit()) if max_connections is None else max_connections
    guard = ConnectionGuard(cap, header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s)
    # proxy_headers off: the record's client address is the socket's peer, never a header's claim
    # (uvicorn would take X-Forwarded-For from any loopback client).
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=http_protocol(guard),
        proxy_headers=False,
        timeout_graceful_shutdown=STOP_GRACE_S,
        backlog=BACKLOG,
    )
    return CoveServer(config, guard, stop_replies, tls)
