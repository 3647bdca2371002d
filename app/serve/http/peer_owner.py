"""Which account on this computer owns the other end of a loopback connection, so that `cove
serve` answers the person's own programs and not those of every account on the machine
(loopback is shared by all of them).

Linux tells it through the kernel's socket diagnostics (NETLINK_SOCK_DIAG, what `ss -e` shows
as `uid:`): one exact lookup of the client's socket by its address and port, answered by the
kernel from its socket hash table rather than by a scan of the machine's sockets. No library
wraps this lookup (psutil's net_connections scans every process's file descriptors and needs
privileges for other accounts' sockets), hence the few structs below, as linux/inet_diag.h
lays them out. Elsewhere the owner is unknown (None).

`without_keys` says who is refused before any API key exists: another account, and another
machine (a peer whose owner is unknown and that is not loopback), which may only pair then.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import sys

from app.serve.http.errors import ApiError

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLMSG_HDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
# inet_diag_req_v2: family, protocol, extensions, pad, states; then inet_diag_sockid: source and
# destination ports (big-endian), source and destination addresses (16 bytes each), interface,
# cookie (two 32-bit words; all ones means "any").
_REQUEST_HEAD = struct.Struct("=BBBxI")
_PORTS = struct.Struct(">HH")
_REQUEST_TAIL = struct.Struct("=III")
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
# inet_diag_msg: family, state, timer, retransmits, the 48-byte sockid, expires, rqueue, wqueue, uid, inode.
_REPLY = struct.Struct("=BBBB48sIIIII")


def _packed(address: str, family: int) -> bytes:
    """An address as the sockid holds it: 16 bytes, an IPv4 one in the first four."""
    if family == socket.AF_INET:
        return ipaddress.IPv4Address(address).packed.ljust(16, b"\0")
    return ipaddress.IPv6Address(address).packed


def socket_owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket at `client` that is connected to `server` (both as the
    server sees them: the peer's address and port, and its own), or None where this platform
    or kernel does not tell it, or no such socket is on this machine."""
    if not sys.platform.startswith("linux"):
        return None
    host, port = client
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host.split("%", 1)[0]).version == 6 else socket.AF_INET
        request = (
            _REQUEST_HEAD.pack(family, socket.IPPROTO_TCP, 0, _ALL_STATES)
            + _PORTS.pack(port, server[1])
            + _packed(host.split("%", 1)[0], family)
            + _packed(server[0].split("%", 1)[0], family)
            + _REQUEST_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
        )
    except (ValueError, struct.error):
        return None
    message = _NLMSG_HDR.pack(_NLMSG_HDR.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(1.0)
            nl.sendto(message, (0, 0))
            data = nl.recv(8192)
    except OSError:  # no sock_diag in this kernel (or netlink refused in a sandbox)
        return None
    if len(data) < _NLMSG_HDR.size + _REPLY.size:
        return None
    _length, kind, _flags, _seq, _pid = _NLMSG_HDR.unpack_from(data)
    if kind != _SOCK_DIAG_BY_FAMILY:  # NLMSG_ERROR: no such socket here (the peer is another machine)
        return None
    return int(_REPLY.unpack_from(data, _NLMSG_HDR.size)[8])


def is_this_account(client: tuple[str, int] | None, server: tuple[str, int] | None) -> bool | None:
    """True when the connection comes from a program of the account running Cove, False when
    from another account on this computer, None when that cannot be told."""
    if client is None or server is None:
        return None
    owner = socket_owner(client, server)
    return None if owner is None else owner == os.getuid()


def without_keys(client: tuple[str, int] | None, server: tuple[str, int] | None) -> ApiError | None:
    """Before any API key exists, who is refused: a program of another account on this computer
    (403), and another machine (401), which may only pair then (POST /cove/pair takes no key).
    None for a program of the person's own account, or a loopback peer whose owner cannot be told."""
    mine = is_this_account(client, server)
    if mine is False:
        return ApiError(
            403,
            "this server answers only the programs of the account that runs Cove; "
            "for another account, make it a key (cove serve keys add NAME)",
            "permission_error",
            code="another_account",
        )
    if mine is None and not _loopback(client[0] if client else None):
        return ApiError(
            401,
            "this server needs a key from other machines: pair this one (`cove serve pair` on the server, "
            "then `cove remote pair` here), or make a key (cove serve keys add NAME)",
            "authentication_error",
            code="invalid_api_key",
        )
    return None


def _loopback(host: str | None) -> bool:
    try:
        return isinstance(host, str) and ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False
