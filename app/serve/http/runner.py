"""The API server on a thread of its own, for the window's Server switch: uvicorn's event loop
runs there with its own connection to the history database (opened on that thread), and the
window reads what it shows (the address, the live requests, the loaded models) through
thread-safe snapshots."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.engine.client import EngineClient
from app.paths import Paths
from app.serve.http.http import LOOPBACK_NAMES
from app.serve.pool.live_request import LiveRequest
from app.serve.pool.pool import ModelPool
from app.serve.pool.window_gate import WindowGate


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
    ) -> None:
        self.paths, self.host, self.port, self.parallel, self.ttl_s = paths, host, port, parallel, ttl_s
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
        from app.serve.http.serving import url_host

        return f"http://{url_host(self.host)}:{self.port}/v1"

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

        try:
            sock = listen_socket(self.host, self.port)
        except ListenError as exc:
            self.error = str(exc)
            return self.error
        self._thread = threading.Thread(target=self._run, args=(sock,), name="cove-serve", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s):
            return self.error or "the server did not start in time"
        return self.error

    def _run(self, sock: socket.socket) -> None:
        from app.core import open_core
        from app.serve.api.service import Service
        from app.serve.http.keys import ApiKeys
        from app.serve.http.server import create_app
        from app.serve.http.serving import make_server

        core = None
        try:
            core = open_core(self.paths)
            loopback = self.host in LOOPBACK_NAMES
            if not loopback and not ApiKeys(core.db).names():
                self.error = f"listening on {self.host} lets other machines in: make an API key first"
                return
            # The service gives the pool each model's load settings, read off the event loop.
            self._pool = pool = ModelPool(parallel=self.parallel, ttl_s=self.ttl_s, n_ctx=core.settings.sampling.n_ctx)
            if self.window_engine is not None:
                pool.adopt(self.window_engine, self.window_first)
            self._service = service = Service(core, pool)
            app = create_app(core, pool, host_names=LOOPBACK_NAMES if loopback else None, service=service)
            self._server = server = make_server(app, service.stop_all)
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
