"""Turning the window's API server on and off: a new server (from the factory the composition
root passes in) each time it is turned on, started and stopped off the UI thread so the window
never waits for a port, a model being unloaded or a reply being cancelled. Nothing is
remembered: the server is off at every start of the window. Turned on `others`, the factory makes
a server that other machines reach (every address, HTTPS, app/serve/http/runner.py)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal

from ui.background import run_in_background

if TYPE_CHECKING:
    from app.serve.http.runner import LoadedEngine
    from app.serve.http.tls import MachineCertificate
    from app.serve.pool.live_request import LiveRequest

OFF, STARTING, ON, STOPPING = "off", "starting", "on", "stopping"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class Server(Protocol):
    """What the window needs of app.serve.http.runner.ServerThread."""

    error: str | None
    certificate: MachineCertificate | None  # what it serves other machines with (None: this computer only)
    certificate_der: bytes | None

    @property
    def address(self) -> str: ...
    @property
    def running(self) -> bool: ...
    def start(self, timeout_s: float = ...) -> str | None: ...
    def stop(self, timeout_s: float = ...) -> None: ...
    def live(self) -> list[LiveRequest]: ...
    def loaded(self) -> list[LoadedEngine]: ...
    def events(self) -> list[str]: ...
    def others_urls(self) -> list[str]: ...


class ServerFactory(Protocol):
    """(port) -> a server for this computer only, not started yet; (port, True) -> one that
    other machines reach too."""

    def __call__(self, port: int, others: bool = ..., /) -> Server: ...


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


class ServerControl(QObject):
    """`turn_on(port)`, `turn_off()`; `state_changed(state, why)` tells every change, `why` being
    the sentence that says why it is off when it could not start or stopped by itself."""

    state_changed = Signal(str, str)

    def __init__(self, factory: ServerFactory, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._factory = factory
        self.server: Server | None = None
        self.others = False  # whether the server on (or starting) lets other machines in
        self.state = OFF
        self.why = ""
        # Threading: set by the start and stop threads; the UI thread (and the quit) waits on them.
        self._start_done = threading.Event()
        self._start_done.set()
        self._stop_done = threading.Event()
        self._stop_done.set()
        self._quitting = False

    @property
    def address(self) -> str | None:
        return self.server.address if self.server is not None and self.state == ON else None

    def turn_on(self, port: int, others: bool = False) -> None:
        if self.state != OFF or self._quitting:
            return
        server = self.server = self._factory(port, True) if others else self._factory(port)
        self.others = others
        done = self._start_done = threading.Event()
        self._set(STARTING, "")

        def start() -> str | None:
            try:
                return server.start(START_TIMEOUT_S)
            finally:
                done.set()

        run_in_background(
            self,
            start,
            on_done=lambda error: self._started(server, error),
            on_failed=lambda why: self._started(server, why),
            name="cove-serve-start",
        )

    def turn_off(self) -> None:
        if self.state == ON and self.server is not None:
            self._set(STOPPING, "")
            self._stop(self.server, report=True)

    def check(self) -> None:
        """Notice a server that stopped by itself (its thread ended with an error)."""
        if self.state == ON and self.server is not None and not self.server.running:
            why = sentence(self.server.error or "the server stopped")
            self.server = None
            self._set(OFF, why)

    def shutdown(self) -> None:
        """On quit: begin stopping whatever is on or starting; `wait_stopped` waits for it."""
        self._quitting = True
        if self.server is not None and self.state in (ON, STARTING):
            self._stop(self.server, report=False)

    def wait_stopped(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the last stop to finish (any thread); True once it has."""
        return self._stop_done.wait(timeout_s)

    def _started(self, server: Server, error: str | None) -> None:
        if server is not self.server or self.state != STARTING:
            return
        if error:
            self.server = None
            self._stop(server, report=False)  # a server that started too late must not linger
            self._set(OFF, sentence(error))
        else:
            self._set(ON, "")

    def _stop(self, server: Server, *, report: bool) -> None:
        started = self._start_done
        done = self._stop_done = threading.Event()

        def stop() -> None:
            try:
                started.wait(START_TIMEOUT_S)  # a server still starting is stopped once it has
                server.stop(STOP_TIMEOUT_S)
            finally:
                done.set()

        run_in_background(
            self,
            stop,
            on_done=lambda _r: self._stopped(server) if report else None,
            on_failed=lambda why: self._stopped(server, why) if report else None,
            name="cove-serve-stop",
        )

    def _stopped(self, server: Server, why: str = "") -> None:
        if server is self.server:
            self.server = None
            self._set(OFF, sentence(why))

    def _set(self, state: str, why: str) -> None:
        self.state, self.why = state, why
        self.state_changed.emit(state, why)
