"""The connections of the API server kept within bounds: at most `max_connections` open (a new
one closes the longest-waiting connection that has no request in progress, or is refused with a
JSON 503 when every one has), a request's headers due within HEADER_TIMEOUT_S and its body
within BODY_TIMEOUT_S, and the soft limit on open files raised toward the hard one.

uvicorn (0.55) has a keep-alive timeout but none for headers or bodies: a connection that
never sends a request, or sends its headers or body a byte at a time, stays open for ever, and
its `limit_concurrency` answers 503 to new requests rather than closing idle connections. So
`guarded_protocol` wraps uvicorn's h11 protocol, and a `ConnectionGuard` sweeps the connections
once a second on the server's event loop (everything here runs on that loop's thread)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import Any

HEADER_TIMEOUT_S = 10.0  # from the connection's opening, or its last response's end, to a request's whole headers
BODY_TIMEOUT_S = 60.0  # from a request's headers to its body's end (4 MB at most, app/serve/http/http.py)
DEFAULT_MAX_CONNECTIONS = 2048
FD_RESERVE = 256  # open files kept for everything else: the database, engine pipes, model files, logs
SWEEP_INTERVAL_S = 1.0
ACCEPT_LOG_INTERVAL_S = 10.0

log = logging.getLogger("uvicorn.error")  # configured by uvicorn: one line on stderr

WAITING, BODY, REPLYING = "waiting", "body", "replying"


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": "the server has too many connections open, every one with a request in progress; try again shortly",
                "type": "server_error",
                "param": None,
                "code": "too_many_connections",
            }
        }
    ).encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def phase_of(protocol: Any) -> tuple[str, int]:
    """(what the connection is doing, which request): WAITING for a request's headers (a fresh
    or kept-alive connection), reading a request's BODY, or REPLYING (the app has the request)."""
    cycle = getattr(protocol, "cycle", None)
    if cycle is None or cycle.response_complete:
        return WAITING, id(cycle)
    return (BODY if cycle.more_body else REPLYING), id(cycle)


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (each connection holds
    one); returns the soft limit now in force (a large number where there is none to read)."""
    if sys.platform == "win32":
        return 1 << 20
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # a limit the system does not let us raise: the connection cap below follows the soft one
    return soft


def connection_cap(open_files: int, wanted: int = DEFAULT_MAX_CONNECTIONS) -> int:
    """How many connections fit in `open_files` with FD_RESERVE left over (at least 16)."""
    return max(16, min(wanted, open_files - FD_RESERVE))


class ConnectionGuard:
    """The open connections, oldest first, with when each entered its phase; closes those past
    their phase's time and makes room for new ones (on the event loop's thread only)."""

    def __init__(self, max_connections: int, *, header_timeout_s: float = HEADER_TIMEOUT_S, body_timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.max_connections = max_connections
        self.limits = {WAITING: header_timeout_s, BODY: body_timeout_s}
        self.open: dict[Any, tuple[tuple[str, int], float]] = {}  # protocol -> (phase, since); insertion order: oldest first
        self.evicted = self.refused = self.timed_out = 0
        self._sweeper: asyncio.TimerHandle | None = None
        self._accept_failures = 0
        self._accept_logged = 0.0

    def opened(self, protocol: Any) -> bool:
        """A connection was accepted: False when it must be refused (every other one is busy)."""
        if len(self.open) >= self.max_connections and not self._evict_one():
            self.refused += 1
            return False
        self.open[protocol] = (phase_of(protocol), time.monotonic())
        return True

    def closed(self, protocol: Any) -> None:
        self.open.pop(protocol, None)

    def moved(self, protocol: Any) -> None:
        """The connection may have entered another phase (data arrived, a response ended)."""
        entry = self.open.get(protocol)
        if entry is not None:
            phase = phase_of(protocol)
            if phase != entry[0]:
                self.open[protocol] = (phase, time.monotonic())

    def _evict_one(self) -> bool:
        for protocol, ((phase, _cycle), _since) in self.open.items():
            if phase == WAITING:
                self._close(protocol)
                self.evicted += 1
                return True
        return False

    def _close(self, protocol: Any) -> None:
        self.open.pop(protocol, None)
        transport = getattr(protocol, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()

    def sweep(self) -> None:
        """Close every connection that has been waiting for headers or a body past its limit."""
        now = time.monotonic()
        for protocol in list(self.open):
            self.moved(protocol)
            (phase, _cycle), since = self.open[protocol]
            limit = self.limits.get(phase)
            if limit is not None and now - since > limit:
                self._close(protocol)
                self.timed_out += 1

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sweep once a second, and log failures to accept a connection once per interval (the
        event loop's default would log a traceback for each)."""
        default = loop.get_exception_handler()

        def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if "accept" in str(context.get("message", "")):
                self._accept_failed(context.get("exception"))
            elif default is not None:
                default(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(on_loop_error)

        def tick() -> None:
            self.sweep()
            self._sweeper = loop.call_later(SWEEP_INTERVAL_S, tick)

        self._sweeper = loop.call_later(SWEEP_INTERVAL_S, tick)

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _accept_failed(self, exc: object) -> None:
        self._accept_failures += 1
        now = time.monotonic()
        if now - self._accept_logged >= ACCEPT_LOG_INTERVAL_S:
            log.warning(
                "cove serve: could not accept %d connection(s) in the last %g s (%s); %d open",
                self._accept_failures,
                ACCEPT_LOG_INTERVAL_S,
                exc,
                len(self.open),
            )
            self._accept_logged, self._accept_failures = now, 0


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol reporting to `guard`: each connection as it opens, moves between
    phases and closes."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    refusal = _refusal()

    class GuardedProtocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not guard.opened(self):
                transport.write(refusal)
                transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            guard.moved(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            guard.moved(self)

    return GuardedProtocol
