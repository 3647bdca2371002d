"""The seconds of "Thinking… 14 s": one timer on the window thread that ticks while a reply in the
view is thinking, and rewrites that reply's row only when its whole second changes. Reasoning
text reaches the row once a frame (ConversationView.append_reasoning); this timer only moves the
seconds between frames, and stops when no reply thinks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer

from ui.conversation.reasoning_rows import tick_reasoning

TICK_MS = 250  # a second shown at most this late


class ThinkingClock(QObject):
    """`watch(message_id)` once a reply thinks; `clock` (time.perf_counter, the clock of the turn's
    event times) may be replaced by a test, which then drives `timer`."""

    def __init__(self, model: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._model = model  # the view's ConversationModel, now
        self.clock: Callable[[], float] = time.perf_counter
        self._ids: set[str] = set()
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self.tick)

    def watch(self, message_id: str) -> None:
        self._ids.add(message_id)
        if not self.timer.isActive():
            self.timer.start()

    def tick(self) -> None:
        model, now = self._model(), self.clock()
        self._ids = {message_id for message_id in self._ids if tick_reasoning(model, message_id, now)}
        if not self._ids:
            self.timer.stop()

    @property
    def watching(self) -> frozenset[str]:
        """The replies whose seconds it moves."""
        return frozenset(self._ids)
