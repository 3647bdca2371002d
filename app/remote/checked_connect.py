"""The private-network decision made on the address actually connected to: the transport that
carries a conversation to one of the person's servers resolves the name itself, keeps only the
addresses the person allowed (their machine and private network, or any once they agreed the
server is theirs), and connects to one of those very addresses. A name that resolved to a private
address when it was checked and to a public one a moment later (another network, a DNS answer
that changed) cannot slip through between the check and the connection.

httpx's HTTPTransport does not take a network backend, while the httpcore pool under it does:
`CheckedTransport` is HTTPTransport with its pool built again around `CheckedBackend` (the same
TLS context, so the certificate is still checked against the name, which stays the SNI).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

from app.remote.privacy import ConsentNeeded, is_private_address


def resolve_for_connect(host: str, port: int) -> list[str]:
    """Every address `host` resolves to for a TCP connection, in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class PublicAddress(ConsentNeeded):
    """The name now resolves only to addresses outside the person's private network: nothing was sent."""

    def __init__(self, host: str, addresses: list[str], connection: str | None = None) -> None:
        super().__init__(host, connection)
        self.addresses = addresses
        shown = ", ".join(addresses[:3])
        self.args = (
            f"{host} now resolves to {shown}, which is not this machine or your private network, so nothing "
            "was sent; send again to be asked whether this server is yours.",
        )


class CheckedBackend(httpcore.SyncBackend):
    """Connects only to addresses `allow_public()` permits: private ones always, public ones when
    it returns True. `resolver(host, port)` gives the addresses (tests give their own)."""

    def __init__(
        self, allow_public: Callable[[], bool], connection: str | None = None, resolver: Callable[[str, int], list[str]] | None = None
    ) -> None:
        self.allow_public, self.connection = allow_public, connection
        self.resolver = resolver or resolve_for_connect

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        allowed = addresses if self.allow_public() else [a for a in addresses if is_private_address(a)]
        if not allowed:
            raise PublicAddress(host, addresses, self.connection)
        last: Exception | None = None
        for address in allowed:  # the checked address itself, never the name again
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        assert last is not None
        raise last


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport, connecting through `CheckedBackend`."""

    def __init__(self, verify: ssl.SSLContext, backend: CheckedBackend) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._pool = httpcore.ConnectionPool(ssl_context=verify, network_backend=backend)
