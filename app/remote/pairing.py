"""The other machine's side of pairing (`cove remote pair NAME https://HOST:PORT CODE`): read the
code (app/pairing/code.py), open a TLS connection that trusts no CA, and compare the certificate
the server shows with the fingerprint the code carries BEFORE anything is sent. Only when they
match does the code's secret go out, over that same connection, to `POST /cove/pair`; the key
that comes back goes to the keyring, the certificate to Cove's folder of pinned certificates
(Connections.pinned_dir), and the connection is added with that certificate as its CA file.

The TLS handshake itself proves the server holds the certificate's private key (its signature
over the handshake is checked whatever the verification mode), so a machine in the middle would
need a certificate whose SHA-256 starts with the code's 95 bits.

`pair` is three steps, which the window runs on two threads: `check_unused` and `save` on the
thread that owns the history, `exchange` (the network, no database) on any other."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.pairing.code import PairingCode, parse_code
from app.private_files import make_private
from app.remote.connections import Connection, ConnectionProblem, Connections, check_name, normalise_url
from app.remote.errors import server_message
from app.remote.http_client import origin
from app.serve.http.tls import fingerprint
from models.network import NetworkGate

PAIR_PATH = "/cove/pair"
CONNECT_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 30.0
MAX_ANSWER_BYTES = 64 << 10


class PairingRefused(ValueError):
    """Pairing did not happen; the message is a sentence (and says whether anything was sent)."""


@dataclass(frozen=True)
class Paired:
    connection: Connection
    key_name: str  # what the server calls this machine's key (`cove serve keys remove` there unpairs)
    fingerprint: str  # the pinned certificate's SHA-256 fingerprint
    notice: str | None  # when the key could be kept in this run's memory only


@dataclass(frozen=True)
class Learned:
    """What the network step learned from the other Cove: its certificate and the key it made."""

    base_url: str
    der: bytes  # the certificate the server showed, which the code named
    key: str
    key_name: str


def https_url(url: str) -> str:
    """The other Cove's base URL (…/v1), or PairingRefused when it is not https://."""
    base_url = normalise_url(url)
    scheme, host, port = origin(base_url)
    if scheme != "https":
        raise PairingRefused(f"pairing needs the other Cove's https:// address (https://{_netloc(host, port)}); nothing was sent.")
    return base_url


def check_unused(connections: Connections, name: str) -> Path:
    """Before anything is sent (the history's thread): `name` is free, and the folder its
    certificate goes in; ConnectionProblem or PairingRefused otherwise."""
    try:
        existing = connections.get(name)
    except ConnectionProblem:
        existing = None
    if existing is not None:
        raise ConnectionProblem(f"A connection named {existing.name} already exists; remove it first or pick another name.")
    folder = connections.pinned_dir
    if folder is None:
        raise PairingRefused("this history has no folder to keep the other machine's certificate in.")
    return folder


def exchange(gate: NetworkGate, base_url: str, code: PairingCode, machine_name: str | None = None) -> Learned:
    """The network step (any thread; it reads no database): check the certificate at `base_url`
    against `code`, then redeem its secret. PairingRefused, or NetworkRefused when offline."""
    _scheme, host, port = origin(base_url)
    with gate.use("remote-models", base_url):
        der, (key, key_name) = _exchange(host, port, code.names, code.secret, machine_name or socket.gethostname())
    return Learned(base_url, der, key, key_name)


def save(connections: Connections, name: str, learned: Learned) -> Paired:
    """The saving step (the history's thread): pin the certificate and add the connection with
    the key. ConnectionProblem when the connection cannot be added (the pinned file is removed)."""
    folder = check_unused(connections, name)
    cert = x509.load_der_x509_certificate(learned.der)
    make_private((folder,))
    path = folder / f"{name}.pem"
    _write_private(path, cert.public_bytes(serialization.Encoding.PEM))
    try:
        connection = connections.add(name, learned.base_url, key=learned.key, ca_file=str(path))
    except ConnectionProblem:
        path.unlink(missing_ok=True)
        raise
    return Paired(connection, learned.key_name, fingerprint(cert), connections.last_notice)


def pair(connections: Connections, gate: NetworkGate, name: str, url: str, code_text: str, machine_name: str | None = None) -> Paired:
    """Pair with the Cove at `url` as connection `name`: the checks, `exchange` and `save` in turn.
    Raises PairingRefused, PairingCodeError or ConnectionProblem (each a sentence), NetworkRefused
    when offline."""
    code = parse_code(code_text)
    name = check_name(name)
    base_url = https_url(url)
    check_unused(connections, name)
    return save(connections, name, exchange(gate, base_url, code, machine_name))


def _exchange(host: str, port: int, names: Callable[[bytes], bool], secret: str, machine_name: str) -> tuple[bytes, tuple[str, str]]:
    """Connect, check the certificate against the code (`names(der)`) and that it names `host`,
    then send the secret over that connection; the certificate's DER and (key, key name)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # No CA is trusted and no name checked here: the certificate is compared with the code below,
    # before a byte of the request is written.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    where = _netloc(host, port)
    try:
        raw = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise PairingRefused(f"{where} did not answer within {CONNECT_TIMEOUT_S:g} seconds; nothing was sent.") from None
    except ConnectionRefusedError:
        raise PairingRefused(
            f"{where} refused the connection: is `cove serve --host ADDRESS --port {port}` running there? Nothing was sent."
        ) from None
    except socket.gaierror:
        raise PairingRefused(f"the name {host} could not be found; nothing was sent.") from None
    except OSError as exc:
        raise PairingRefused(f"could not connect to {where} ({exc.strerror or exc}); nothing was sent.") from None
    try:
        try:
            tls = context.wrap_socket(raw, server_hostname=host)
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise PairingRefused(
                f"{where} did not complete a TLS handshake ({reason}): pairing needs `cove serve` serving HTTPS there; nothing was sent."
            ) from None
        with tls:
            der = tls.getpeercert(binary_form=True)
            if not der or not names(der):
                raise PairingRefused(
                    f"the machine at {host} presented another certificate than the code names; nothing was sent. A machine "
                    "in the middle may be answering for it, or the code is from another machine (or its certificate changed "
                    "since the code was made: make a new code there)."
                )
            named = _names(der)
            if not _covers(named, host):
                raise PairingRefused(
                    f"the certificate of {where} is the one the code names, but it does not name {host} (it names "
                    f"{', '.join(named) or 'nothing'}); pair with one of those addresses. Nothing was sent."
                )
            return der, _send(tls, host, port, secret, machine_name)
    finally:
        raw.close()


def _send(tls: ssl.SSLSocket, host: str, port: int, secret: str, machine_name: str) -> tuple[str, str]:
    """POST the secret on the verified connection; the key and its name, or PairingRefused."""
    where = _netloc(host, port)
    conn = http.client.HTTPConnection(host, port, timeout=ANSWER_TIMEOUT_S)
    conn.sock = tls  # the connection whose certificate was checked: http.client writes on it, never opens another
    body = json.dumps({"secret": secret, "name": machine_name}).encode()
    headers = {"Host": where, "Content-Type": "application/json", "Accept": "application/json", "User-Agent": "Cove"}
    try:
        tls.settimeout(ANSWER_TIMEOUT_S)
        conn.request("POST", PAIR_PATH, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise PairingRefused(f"{where} did not answer the pairing ({type(exc).__name__}); make a new code and try again.") from None
    if response.status == 200:
        try:
            answer = json.loads(data)
            key, key_name = answer["key"], answer["key_name"]
        except (ValueError, KeyError, TypeError):
            answer = None
        if answer is None or not isinstance(key, str) or not isinstance(key_name, str):
            raise PairingRefused(f"{where} answered the pairing without a key; is it a Cove that pairs?")
        return key, key_name
    said = server_message(data, secret) or f"HTTP {response.status}"
    if response.status == 404:
        raise PairingRefused(f"{where} does not pair (it answered 404: {said}); is it a Cove recent enough to pair?")
    raise PairingRefused(f"{where} refused the pairing: {said}")


def _names(der: bytes) -> list[str]:
    cert = x509.load_der_x509_certificate(der)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [n.lower() for n in san.get_values_for_type(x509.DNSName)] + [str(a) for a in san.get_values_for_type(x509.IPAddress)]


def _covers(names: list[str], host: str) -> bool:
    """Whether a client checking names (as every later request does) accepts the certificate for `host`."""
    try:
        return str(ipaddress.ip_address(host.strip("[]"))) in names
    except ValueError:
        return host.lower().rstrip(".") in names


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (0600): a temporary file in its folder, then a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
