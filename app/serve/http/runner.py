"""The API server on a thread of its own, for the window's Server switch: uvicorn's event loop
runs there with its own connection to the history database (opened on that thread), and the
window reads what it shows (the address, the live requests, the loaded models) through
thread-safe snapshots.

On loopback it speaks plain HTTP; with `tls` (the window's "let my other machines connect",
host 0.0.0.0) it serves HTTPS with this machine's certificate, as `cove serve --host` does
(app/serve/http/tls.py), and, as there, starts only once an API key exists."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.client import EngineClient
from app.paths import Paths
from app.serve.http.http import LOOPBACK_NAMES
from app.serve.pool.live_request import LiveRequest
from app.serve.pool.pool import ModelPool
from app.serve.pool.window_gate import WindowGate

if TYPE_CHECKING:
    from app.serve.http.tls import MachineCertificate

ALL_ADDRESSES = "0.0.0.0"


@dataclass(frozen=True)
class LoadedEngine:
    model: str
    loading: bool
    busy: bool
    answering: int = 0  # requests on it now
    slots: int = 1


class ServerThread:
    def __init__(
        self,
        paths: Paths,
        *,
        host: str = "127.0.0.1",
        port: int = 8642,
        parallel: int | None = None,
        ttl_s: float = 600.0,
        window_engine: EngineClient | None = None,
        window_first: Callable[[], bool] = lambda: True,
        tls: bool = False,
    ) -> None:
        self.paths, self.host, self.port, self.parallel, self.ttl_s = paths, host, port, parallel, ttl_s
        self.tls = tls  # HTTPS with this machine's certificate (for an address other machines reach)
        self.certificate: MachineCertificate | None = None  # with tls, once started: what it serves
        self.certificate_der: bytes | None = None  # its DER bytes, which a pairing code names
        self._hosts: list[str] = []  # with tls, what other machines type (hosts_for_others)
        self.window_engine = window_engine  # shared with API requests for the model it has loaded
        self.window_first = window_first  # whether one of its slots is kept for the window's turn (any thread)
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._server: Any = None  # uvicorn.Server, once the thread made it
        self._service: Any = None  # app.serve.api.service.Service
        self._pool: ModelPool | None = None
        self.error: str | None = None

    @property
    def address(self) -> str:
        """The base URL to give a client: with tls on every address, the first one another
        machine types (this machine's programs reach it there too)."""
        from app.serve.http.serving import url_host

        if not self.tls:
            return f"http://{url_host(self.host)}:{self.port}/v1"
        host = self.host if self.host not in (ALL_ADDRESSES, "::") else (self._hosts or ["127.0.0.1"])[0]
        return f"https://{url_host(host)}:{self.port}/v1"

    def others_urls(self) -> list[str]:
        """With tls: the https://HOST:PORT addresses another machine types (pairs with), once started."""
        from app.serve.http.serving import url_host

        if not self.tls:
            return []
        hosts = self._hosts if self.host in (ALL_ADDRESSES, "::") else [self.host]
        return [f"https://{url_host(h)}:{self.port}" for h in hosts]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.error is None

    @property
    def pool(self) -> ModelPool | None:
        """The engines behind the API, once the server thread made them (None before)."""
        return self._pool

    def start(self, timeout_s: float = 30.0) -> str | None:
        """Start serving; returns None once requests are answered, or a sentence saying why not
        (the port is taken, another interface without keys)."""
        if self._thread is not None:
            raise RuntimeError("the server was started already")
        from app.serve.http.serving import ListenError, listen_socket

        context = None
        if self.tls:
            context = self._tls_context()
            if context is None:
                return self.error
        try:
            sock = listen_socket(self.host, self.port)
        except ListenError as exc:
            self.error = str(exc)
            return self.error
        self._thread = threading.Thread(target=self._run, args=(sock, context), name="cove-serve", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s):
            return self.error or "the server did not start in time"
        return self.error

    def _tls_context(self) -> ssl.SSLContext | None:
        """This machine's certificate and its context (None, with `error` set, when it cannot be had)."""
        from app.serve.http.tls import TlsUnavailable, hosts_for_others, serving_context

        try:
            context, cert = serving_context(self.paths.tls_dir, self.host)
            der = _der(cert.cert_file)
        except TlsUnavailable as exc:
            self.error = (
                f"other machines cannot connect: this machine's certificate for HTTPS could not be made ({exc}); "
                "make that folder writable, or serve this computer only"
            )
            return None
        self.certificate, self.certificate_der, self._hosts = cert, der, hosts_for_others(cert)
        return context

    def _run(self, sock: socket.socket, context: ssl.SSLContext | None) -> None:
        from app.core import open_core
        from app.serve.api.service import Service
        from app.serve.http.server import create_app
        from app.serve.http.serving import make_server

        core = None
        try:
            core = open_core(self.paths)
            loopback = self.host in LOOPBACK_NAMES
            # The service gives the pool each model's load settings, read off the event loop.
            self._pool = pool = ModelPool(parallel=self.parallel, ttl_s=self.ttl_s, n_ctx=core.settings.sampling.n_ctx)
            if self.window_engine is not None:
                pool.adopt(self.window_engine, self.window_first)
            self._service = service = Service(core, pool)
            app = create_app(core, pool, host_names=LOOPBACK_NAMES if loopback else None, service=service)
            self._server = server = make_server(app, service.stop_all, tls=context)
            starting = threading.Thread(target=self._mark_started, daemon=True)
            starting.start()
            server.run(sockets=[sock])
        except Exception as exc:  # noqa: BLE001 - the window shows the sentence; the history is untouched
            self.error = f"the server stopped: {exc}"
        finally:
            sock.close()
            if core is not None:
                core.close()
            self._started.set()

    def _mark_started(self) -> None:
        server = self._server
        while server is not None and not server.started and self._thread is not None and self._thread.is_alive():
            threading.Event().wait(0.02)
        self._started.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop answering; replies in progress are cancelled and every engine process stops."""
        server, thread = self._server, self._thread
        if self._service is not None:
            self._service.stop_all()
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout_s)

    def gate(self) -> WindowGate | None:
        """How the window's turns borrow its engine while the server runs (None: not running)."""
        pool = self._pool
        if not self.running or pool is None or pool.loop is None or pool.window_engine is None:
            return None
        return WindowGate(pool, pool.loop)

    def live(self) -> list[LiveRequest]:
        service = self._service
        return service.live() if service is not None else []

    def loaded(self) -> list[LoadedEngine]:
        pool = self._pool
        if pool is None:
            return []
        return [LoadedEngine(e.model.name, e.loading, e.busy, e.leases, e.slots) for e in list(pool.engines)]

    def events(self) -> list[str]:
        pool = self._pool
        return list(pool.events) if pool is not None else []


def _der(cert_file: Path) -> bytes:
    """The DER bytes of the PEM certificate in `cert_file`; TlsUnavailable when it does not read."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from app.serve.http.tls import TlsUnavailable

    try:
        return x509.load_pem_x509_certificate(cert_file.read_bytes()).public_bytes(serialization.Encoding.DER)
    except (OSError, ValueError) as exc:
        raise TlsUnavailable(f"the certificate {cert_file} could not be read back ({exc})") from None
