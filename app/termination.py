"""SIGTERM and SIGHUP (a logout, a closed terminal, `timeout`) for the command line: they stop
a reply the way Ctrl-C does, so the partial reply is kept (marked interrupted) and the
process exits with 128 + the signal's number."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

TERMINATING_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM,) if sys.platform == "win32" else (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the first SIGTERM or SIGHUP. A KeyboardInterrupt, so every
    path that keeps a reply on Ctrl-C keeps it on these too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


Handlers = dict[signal.Signals, object]


def raise_on_termination() -> Handlers:
    """Install the handlers and return the ones they replace (for `restore`). Only the first
    signal raises: a second one while the partial reply is being saved must not cut the save
    short. Off the main thread (where Python cannot install handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    raised = False

    def handler(signum: int, _frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        raise Terminated(signum)

    previous: Handlers = {}
    for sig in TERMINATING_SIGNALS:
        previous[sig] = signal.signal(sig, handler)
    return previous


def restore(previous: Handlers) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]
