"""A paired machine's certificate, renewed: Cove makes a new certificate for its machine before
the old one ends, or when it serves on an address the old one does not name, and keeps the key
(app/serve/http/tls.py). A connection pinned to the old certificate then fails its check. The
key is what pairing proved the machine holds, so when the certificate the server shows now has
the same public key (and is valid now, for the connection's host), it replaces the pinned file,
and the request is made again. Any other certificate is a changed one: nothing is sent, and the
person is told to pair again.

The TLS handshake of this look proves the server holds the key of the certificate it shows (its
signature over the handshake is checked whatever the verification mode), and only the handshake
is made: nothing is written to the connection."""

from __future__ import annotations

import socket
import ssl
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.atomic_file import write_bytes_whole
from app.remote.connections import Connection, pinned_file


def _public_key(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def is_verification_failure(exc: BaseException) -> bool:
    """Whether a failed request's cause is a certificate that did not verify."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def shown_certificate(host: str, port: int, timeout_s: float) -> bytes:
    """The certificate (DER) the server at host:port shows, after a handshake that trusts nothing."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection((host, port), timeout=timeout_s) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    if not der:
        raise ssl.SSLError("the server showed no certificate")
    return der


def renew_pin(connection: Connection, host: str, port: int, *, timeout_s: float = 5.0, now: datetime | None = None) -> bool:
    """Replace the connection's pinned certificate with the one the server shows when it has the
    same key and is valid now; True when it was replaced. False for a connection that is not
    pinned, a different key, a certificate not valid now, or a server that cannot be reached."""
    if not pinned_file(connection.ca_file) or connection.ca_file is None:
        return False
    path = Path(connection.ca_file)
    try:
        pinned = x509.load_pem_x509_certificate(path.read_bytes())
        shown = x509.load_der_x509_certificate(shown_certificate(host, port, timeout_s))
    except (OSError, ValueError, ssl.SSLError):
        return False
    moment = now or datetime.now(UTC)
    if _public_key(shown) != _public_key(pinned):
        return False
    if not shown.not_valid_before_utc <= moment <= shown.not_valid_after_utc:
        return False
    try:
        write_bytes_whole(path, shown.public_bytes(serialization.Encoding.PEM))
    except OSError:
        return False
    return True


def changed_sentence(connection: Connection) -> str:
    return (
        f"{connection.host} showed a certificate other than the one this Cove paired with as {connection.name}, "
        "so nothing was sent. If that machine's Cove was set up again, pair again: `cove serve pair` there, then "
        f"Connections → Pair with a Cove here (or `cove remote pair {connection.name} URL CODE`). If not, something "
        "on the network may be pretending to be it."
    )
