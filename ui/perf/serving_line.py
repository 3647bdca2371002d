"""The performance panel's line for what the engine is serving: how many replies it generates at
once in its slots (the window's and API clients'), how many requests wait for a slot, and their
tokens per second together; and the poller that reads it from the engine client on the UI thread
(`EngineClient.serving()` is cheap: no I/O, no waiting)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, QTimer

from ui.theme import format_int, format_rate

NBSP = "\u00a0"


class ServingFigures(Protocol):
    """What `EngineClient.serving()` returns (app/engine/generation.py Serving): all zero when idle
    or when nothing is loaded."""

    @property
    def sequences(self) -> int: ...

    @property
    def waiting(self) -> int: ...

    @property
    def tokens_per_s(self) -> float: ...

    @property
    def slots(self) -> int: ...


def serving_text(figures: ServingFigures | None) -> str:
    """E.g. "3 of 4 slots · 1 waiting · 142 tok/s together"; "idle · 4 slots" when nothing runs;
    "" when no model is loaded (the panel hides the line)."""
    if figures is None or figures.slots <= 0:
        return ""
    slots = f"{format_int(figures.slots)} slot{'' if figures.slots == 1 else 's'}"
    if figures.sequences <= 0 and figures.waiting <= 0:
        return f"idle · {slots}"
    parts = [f"{format_int(figures.sequences)} of {slots}"]
    if figures.waiting > 0:
        parts.append(f"{format_int(figures.waiting)} waiting")
    if figures.sequences > 0 and figures.tokens_per_s > 0:
        parts.append(format_rate(figures.tokens_per_s) + (" together" if figures.sequences > 1 else ""))
    return " · ".join(part.replace(" ", NBSP) for part in parts)  # a narrow panel wraps between parts only


def serving_header(figures: ServingFigures | None) -> str:
    """What the collapsed panel's header adds: "3 at once" when more than one reply is served."""
    if figures is None or figures.sequences <= 1:
        return ""
    return f"{format_int(figures.sequences)} at once"


def serving_live(figures: ServingFigures | None) -> bool:
    """The engine is generating or has requests waiting (its figures move every poll)."""
    return figures is not None and (figures.sequences > 0 or figures.waiting > 0)


class ServingPoller(QObject):
    """Every `interval_ms` while started, calls `source()` on the UI thread and hands the figures
    to `changed(figures)` when what the panel shows of them changed (their line or header)."""

    def __init__(self, changed: Callable[[ServingFigures | None], None], interval_ms: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._changed = changed
        self._source: Callable[[], ServingFigures] | None = None
        self._shown: tuple[str, str] = ("", "")
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)

    def set_source(self, source: Callable[[], ServingFigures] | None) -> None:
        """Read the figures from `source` from now on (None: none, the line is hidden)."""
        self._source = source
        self.poll()  # None: hides the line now

    def start(self) -> None:
        """Read the figures now and every interval from now on (while there is a source)."""
        if self._source is not None and not self.timer.isActive():
            self.poll()
            self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def poll(self) -> None:
        """Read the figures once; `changed` only when the shown text differs."""
        figures = self._source() if self._source is not None else None
        if self._source is None:
            self.timer.stop()
        shown = (serving_text(figures), serving_header(figures))
        if shown != self._shown:
            self._shown = shown
            self._changed(figures)
