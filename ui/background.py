"""Work off the UI thread for the window: `run_in_background` runs a function on a daemon
thread and delivers its result, or one sentence for what it raised, on the UI thread; a result
that arrives after its owner was destroyed, or after the job was dropped, is thrown away.

Threading invariant: the function runs on its own thread and must not touch a widget or the
history's SQLite connection; read what it needs on the UI thread before starting it. Daemon
threads rather than a QThreadPool: Qt waits for pool threads when the application quits, and
a stalled call (a Hub request, a hung load) must never hold the window open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

import shiboken6
from PySide6.QtCore import QObject, Signal

from app.errors import describe_error

T = TypeVar("T")


class _Relay(QObject):
    """Lives on the UI thread; the worker emits on it, and Qt queues the call to the UI thread."""

    delivered = Signal(object, object)  # result, exception (exactly one is meaningful)


class BackgroundJob(Generic[T]):
    """A function running off the UI thread. `drop()` discards whatever it delivers later."""

    def __init__(self) -> None:
        self.dropped = False
        self.done = False

    def drop(self) -> None:
        self.dropped = True


def run_in_background(
    owner: QObject,
    work: Callable[[], T],
    *,
    on_done: Callable[[T], None],
    on_failed: Callable[[str], None] | None = None,
    describe: Callable[[BaseException], str] = describe_error,
    name: str = "cove-background",
) -> BackgroundJob[T]:
    """Start `work()` on a daemon thread. On the UI thread, later: `on_done(result)`, or
    `on_failed(sentence)` with `describe(exc)` for what it raised; neither once `owner` is
    destroyed or the job is dropped. Call from the UI thread."""
    job: BackgroundJob[T] = BackgroundJob()
    relay = _Relay()  # no parent: the worker's reference keeps it alive until it has emitted

    def deliver(result: object, exc: object) -> None:
        job.done = True
        relay.deleteLater()
        if job.dropped or not shiboken6.isValid(owner):
            return
        if exc is None:
            on_done(cast(T, result))  # the worker's own result, through a Signal(object, object)
        elif on_failed is not None:
            on_failed(describe(cast(BaseException, exc)))  # what work() raised

    relay.delivered.connect(deliver)

    def run() -> None:
        try:
            result, error = work(), None
        except Exception as exc:  # noqa: BLE001 - delivered as a sentence
            result, error = None, exc
        try:
            relay.delivered.emit(result, error)
        except RuntimeError:  # the application is gone
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    return job
