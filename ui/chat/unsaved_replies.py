"""Replies the history file could not take when they finished (the disk is full): kept in
memory, shown as finished, and written by a retry every few seconds until the file takes
them (or at quit, one last try)."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import QObject, QTimer, Signal

from app.store.history import Message
from app.turn.record import TurnRecord

RETRY_MS = 5000


class UnsavedReplies(QObject):
    saved = Signal(object)  # the Message, now in the history file

    def __init__(self, parent: QObject | None = None, *, retry_ms: int = RETRY_MS) -> None:
        super().__init__(parent)
        self._records: list[TurnRecord] = []
        self._timer = QTimer(self)
        self._timer.setInterval(retry_ms)
        self._timer.timeout.connect(self.retry)

    @property
    def pending(self) -> list[Message]:
        return [r.unsaved for r in self._records if r.unsaved is not None]

    @property
    def retry_ms(self) -> int:
        """How long between tries, in milliseconds (RETRY_MS unless given or set)."""
        return self._timer.interval()

    @retry_ms.setter
    def retry_ms(self, ms: int) -> None:
        self._timer.setInterval(ms)

    def keep(self, record: TurnRecord) -> None:
        """Take a record whose finish failed (its `unsaved` holds the reply) and retry it."""
        self._records.append(record)
        self._timer.start()

    def retry(self) -> bool:
        """Try to write every pending reply, oldest first; True when none is left. Stops at the
        first that still fails (the file is still full), so the order they finished is kept."""
        while self._records:
            record = self._records[0]
            try:
                final = record.retry_finish()
            except sqlite3.Error:
                return False
            self._records.pop(0)
            self.saved.emit(final)
        self._timer.stop()
        return True
