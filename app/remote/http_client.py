"""The HTTP client of one connection: TLS verified against the system's CAs (and the
connection's extra CA file), a 5 s connect timeout, the key only in the requests to the
connection's own origin, redirects followed only within that origin (at most 3), no proxy or
.netrc from the environment, every transport failure turned into a `RemoteProblem`, and a
conversation sent only to an address the person allowed, judged when the connection is made
(app/remote/checked_connect.py).

Every request runs inside `gate.use(kind, url)` for its whole life (a stream's too), so
offline mode refuses it before any socket opens and the network indicator names the host.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from app.remote.checked_connect import CheckedBackend, CheckedTransport
from app.remote.connections import Connection, pinned_file
from app.remote.errors import RemoteProblem, scrub
from app.remote.pin_renewal import changed_sentence, is_verification_failure, renew_pin
from models.network import NetworkGate

MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "Cove"


@dataclass(frozen=True)
class Reply:
    """A whole response: its status, headers (names in lower case) and body."""

    status: int
    headers: dict[str, str] = field(hash=False)
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def ssl_context(ca_file: str | None, *, pinned: bool = False) -> ssl.SSLContext:
    """Verification against the system's CAs and certifi's, plus `ca_file` when given; `pinned`:
    against `ca_file` alone (a paired machine's certificate: no other, however issued, is taken)."""
    if pinned:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, certificate required
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    else:
        context = ssl.create_default_context()
        try:
            import certifi

            context.load_verify_locations(cafile=certifi.where())
        except (ImportError, OSError, ssl.SSLError):
            pass  # the system's store alone
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise RemoteProblem(
                f"The connection's certificate file {ca_file} could not be read ({type(exc).__name__}); add it to the connection again.",
                "tls",
            ) from None
    return context


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an absolute URL, the port filled in from the scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def root_url(connection: Connection) -> str:
    """The server's root: the base URL without its trailing /v1 (llama-server's /props, Ollama's
    /api/... live there)."""
    base = connection.base_url
    return base[: -len("/v1")] if base.endswith("/v1") else f"{urlsplit(base).scheme}://{urlsplit(base).netloc}"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def transport_problem(
    exc: httpx.TransportError, host: str, *, connect_timeout_s: float, key: str | None, tls: bool = True
) -> RemoteProblem:
    """One sentence for a request that failed below HTTP (connecting, TLS, the socket) before
    an answer arrived; `tls`: whether the connection's address is https."""
    port = host.rsplit(":", 1)[1] if host.count(":") == 1 else "?"
    if isinstance(exc, httpx.ConnectTimeout):
        return RemoteProblem(
            f"{host} did not answer within {connect_timeout_s:g} seconds: the server may be off or asleep, "
            "a firewall may be in the way, or the address may be wrong.",
            "unreachable",
        )
    if isinstance(exc, httpx.TimeoutException):
        return RemoteProblem(f"{host} stopped answering (nothing arrived for too long).", "unreachable")
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or cause.reason or "not trusted"
            return RemoteProblem(
                f"{host}'s certificate could not be verified ({why}); if the server uses a certificate of its "
                "own, add its CA or certificate file to the connection.",
                "tls",
            )
        if isinstance(cause, ssl.SSLError):
            return RemoteProblem(
                f"A secure (TLS) connection to {host} could not be made ({cause.reason or 'handshake failed'}); "
                "if the server speaks plain http, use an http:// address.",
                "tls",
            )
        if isinstance(cause, ConnectionRefusedError):
            return RemoteProblem(
                f"{host} refused the connection: nothing is listening on port {port} there (is the server running, and on that port?).",
                "unreachable",
            )
        if isinstance(cause, socket.gaierror):
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            return RemoteProblem(
                f"The name {name} could not be found: check the address, and that this machine can reach that network.", "unreachable"
            )
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EHOSTDOWN):
            return RemoteProblem(f"{host} cannot be reached from this machine ({cause.strerror}).", "unreachable")
    detail = scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, key)[:160].rstrip(".")
    if isinstance(exc, httpx.ConnectError):
        return RemoteProblem(f"Could not connect to {host} ({detail}).", "unreachable")
    if isinstance(exc, httpx.RemoteProtocolError) and not tls:
        return RemoteProblem(
            f"{host} closed the connection without an answer ({detail}); if the server uses TLS, use an https:// address.", "protocol"
        )
    return RemoteProblem(f"The connection to {host} broke ({detail}).", "protocol")


class RemoteHttp:
    """Requests to one connection's server; safe for one stream and other calls at once.
    `read_timeout_s`: the longest wait for any bytes (a stream's stall timeout)."""

    def __init__(
        self, connection: Connection, key: str | None, gate: NetworkGate, *, connect_timeout_s: float = 5.0, read_timeout_s: float = 30.0
    ) -> None:
        self.connection = connection
        self.gate = gate
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._key = key
        self._client: httpx.Client | None = None
        self._checked: httpx.Client | None = None  # for conversations: app/remote/checked_connect.py
        self._retired: list[httpx.Client] = []  # clients that trusted a certificate since renewed

    def __repr__(self) -> str:  # never the key
        return f"<RemoteHttp {self.connection.name} {self.connection.host} key={'yes' if self._key else 'no'}>"

    @property
    def has_key(self) -> bool:
        return bool(self._key)

    @property
    def key(self) -> str | None:
        return self._key

    def client(self, checked: bool = False) -> httpx.Client:
        """The client for probes (`checked` False), or the one that carries conversations, which
        connects only to an address the person allowed, judged at connect time; made on first use."""
        existing = self._checked if checked else self._client
        if existing is not None:
            return existing
        timeout = httpx.Timeout(
            connect=self.connect_timeout_s, read=self.read_timeout_s, write=self.read_timeout_s, pool=self.connect_timeout_s
        )
        context = ssl_context(self.connection.ca_file, pinned=pinned_file(self.connection.ca_file))
        transport = CheckedTransport(context, CheckedBackend(lambda: self.connection.public_ok, self.connection.name)) if checked else None
        client = httpx.Client(
            verify=context,
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
            transport=transport,
        )
        if checked:
            self._checked = client
        else:
            self._client = client
        return client

    def close(self) -> None:
        for client in (self._client, self._checked, *self._retired):
            if client is not None:
                client.close()
        self._client = self._checked = None
        self._retired = []

    def api_url(self, path: str) -> str:
        return self.connection.base_url + path

    def root_url(self, path: str) -> str:
        return root_url(self.connection) + path

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    def _send(
        self, method: str, url: str, *, json_body: Any, headers: dict[str, str] | None, read_timeout_s: float | None, checked: bool = False
    ) -> httpx.Response:
        """Send, following redirects within the connection's origin; the response is open
        (stream=True) and its body unread. Raises RemoteProblem, and with `checked` PublicAddress
        (nothing sent) when the name now resolves only outside what the person allowed."""
        home = origin(self.connection.base_url)
        host = self.connection.host
        client = self.client(checked)
        timeout = None
        if read_timeout_s is not None:
            timeout = httpx.Timeout(connect=self.connect_timeout_s, read=read_timeout_s, write=read_timeout_s, pool=self.connect_timeout_s)
        for hop in range(MAX_REDIRECTS + 1):
            # Invariant: the key goes only to the connection's own scheme, host and port.
            if origin(url) != home:
                raise RuntimeError("a request left the connection's origin")
            kwargs: dict[str, Any] = {"headers": self._headers(headers), "json": json_body}
            if timeout is not None:
                kwargs["timeout"] = timeout
            request = client.build_request(method, url, **kwargs)
            try:
                response = client.send(request, stream=True)
            except httpx.TransportError as exc:
                if not self._pin_renewed(exc):
                    raise self._problem(exc) from None
                client = self.client(checked)  # the renewed certificate, pinned; the request is made again
                try:
                    response = client.send(client.build_request(method, url, **kwargs), stream=True)
                except httpx.TransportError as again:
                    raise self._problem(again) from None
            if response.status_code not in _REDIRECTS or "location" not in response.headers:
                return response
            location = response.headers["location"]
            response.close()
            target = urljoin(url, location)
            shown = scrub(target, self._key)[:200]
            if origin(target) != home:
                raise RemoteProblem(
                    f"{host} redirected the request to {shown}, another address; Cove did not follow it, so "
                    "neither your key nor your messages went there (if the server moved, change the "
                    "connection's address).",
                    "redirect",
                    status=response.status_code,
                )
            if hop == MAX_REDIRECTS:
                raise RemoteProblem(
                    f"{host} redirected the request more than {MAX_REDIRECTS} times (last to {shown}).",
                    "redirect",
                    status=response.status_code,
                )
            if response.status_code == 303:
                method, json_body = "GET", None
            url = target
        raise AssertionError("unreachable")

    def _problem(self, exc: httpx.TransportError) -> RemoteProblem:
        """The sentence of a request that failed below HTTP; for a paired connection whose server
        shows another certificate, that it changed (nothing was sent)."""
        if pinned_file(self.connection.ca_file) and is_verification_failure(exc):
            return RemoteProblem(changed_sentence(self.connection), "tls")
        host = self.connection.host
        return transport_problem(exc, host, connect_timeout_s=self.connect_timeout_s, key=self._key, tls=self.connection.tls)

    def _pin_renewed(self, exc: httpx.TransportError) -> bool:
        """Whether a paired server's certificate failed only because it was renewed with the same
        key (app/remote/pin_renewal.py): then the pinned file holds the new one, and the clients
        are made again to trust it."""
        if not pinned_file(self.connection.ca_file) or not is_verification_failure(exc):
            return False
        _, host, port = origin(self.connection.base_url)
        if not renew_pin(self.connection, host, port, timeout_s=self.connect_timeout_s):
            return False
        # New clients read the new file; the old ones are closed with this object (one may be
        # carrying another reply now).
        self._retired.extend(c for c in (self._client, self._checked) if c is not None)
        self._client = self._checked = None
        return True

    def get(self, url: str, *, kind: str = "remote-models", read_timeout_s: float | None = None, max_bytes: int = 8 << 20) -> Reply:
        """A GET whose body is read (at most `max_bytes`); any status. Raises RemoteProblem
        (NetworkRefused when offline)."""
        with self.gate.use(kind, url):
            response = self._send("GET", url, json_body=None, headers={"Accept": "application/json"}, read_timeout_s=read_timeout_s)
            try:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise RemoteProblem(
                            f"{self.connection.host} sent more than {max_bytes >> 20} MiB for {url}.",
                            "protocol",
                            status=response.status_code,
                        )
            except httpx.TransportError as exc:
                raise transport_problem(exc, self.connection.host, connect_timeout_s=self.connect_timeout_s, key=self._key) from None
            finally:
                response.close()
            headers = {name.lower(): value for name, value in response.headers.items()}
            return Reply(response.status_code, headers, bytes(body))

    @contextmanager
    def stream(self, url: str, json_body: Any, *, kind: str = "remote", read_timeout_s: float | None = None) -> Iterator[httpx.Response]:
        """A POST whose response is open for reading in the block, inside the gate the whole time."""
        with self.gate.use(kind, url):
            response = self._send(
                "POST",
                url,
                json_body=json_body,
                headers={"Accept": "text/event-stream", "Accept-Encoding": "identity"},
                read_timeout_s=read_timeout_s,
                checked=True,
            )
            try:
                yield response
            finally:
                response.close()


def abort(response: httpx.Response) -> None:
    """Shut the response's socket down from any thread, so a read blocked on it returns now
    (the reading thread then closes the response). Best effort: nothing to do once it is closed."""
    try:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, under any TLS layer
    except (OSError, AttributeError, ValueError):
        pass
