"""Whether a connection's host is on this machine or the person's private network, and the
one question Cove asks before messages go anywhere else (`ConsentNeeded`)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

# Networks that never leave the person's own machine or network: loopback, RFC 1918 and
# unique-local (fc00::/7), link-local. IPv4-mapped IPv6 addresses are judged as their IPv4.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "::1/128", "fc00::/7", "fe80::/10")
)

Resolver = Callable[[str], list[str]]


class ConsentNeeded(Exception):
    """Raised before messages would go to a host outside the person's private network for the
    first time; the person confirms once (Connections.confirm_public) and it is not asked again."""

    def __init__(self, host: str, connection: str | None = None) -> None:
        self.host = host
        self.connection = connection
        which = f" (connection {connection})" if connection else ""
        super().__init__(
            f"Your messages will be sent to {host}{which}, which is not this machine or your private network. "
            "Confirm once that this server is yours to use it."
        )


def strip_port(host: str) -> str:
    """The host name or address of "host[:port]" ("[v6]:port" included), without brackets."""
    host = host.strip()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host[1:]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host  # a bare IPv6 address, or a name without a port


def is_private_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # a link-local zone ("fe80::1%eth0")
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in PRIVATE_NETWORKS)


def private_without_lookup(host: str) -> bool | None:
    """True or False when the host alone answers it (an address, "localhost", a *.local or
    *.localhost name); None when only a name lookup can (see `is_private_host`)."""
    name = strip_port(host).rstrip(".").lower()
    if not name:
        return False
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        pass
    else:
        return is_private_address(name)
    if name == "localhost" or name.endswith((".localhost", ".local")):
        return True
    return None


def resolve(name: str) -> list[str]:
    """Every address `name` resolves to (blocking; run it off the window's thread)."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


def is_private_host(host: str, resolver: Resolver | None = None) -> bool:
    """Loopback, RFC 1918/ULA/link-local, "localhost", *.local, or a name that resolves only to
    such addresses. A name that does not resolve counts as not private. May block on DNS."""
    known = private_without_lookup(host)
    if known is not None:
        return known
    addresses = (resolver or resolve)(strip_port(host).rstrip("."))
    return bool(addresses) and all(is_private_address(a) for a in addresses)
