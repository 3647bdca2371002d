"""uvicorn's HTTP protocol with TCP_NODELAY on every connection. asyncio sets it only on
sockets whose `proto` is IPPROTO_TCP, and a listening socket made with the default proto 0
(uvicorn's, and ServerThread's) accepts connections it skips; then a stream's first chunk,
written right after the headers, waits for the client's delayed ACK (~40 ms, Nagle's rule)."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.serve.http.connections import ConnectionGuard


def http_protocol(guard: ConnectionGuard | None = None) -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's `http` option; with `guard`, uvicorn's h11 protocol
    kept within the guard's bounds (app/serve/http/connections.py)."""
    base: type[asyncio.Protocol]
    if guard is not None:
        from app.serve.http.connections import guarded_protocol

        base = guarded_protocol(guard)
    else:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol

    class NoDelayProtocol(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass  # the connection is already gone
            super().connection_made(transport)

    return NoDelayProtocol
