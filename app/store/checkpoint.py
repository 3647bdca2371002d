"""Rate-limited checkpoints of a streaming reply: the partial text reaches the history file
at most once per interval, so a crash loses at most that interval of tokens."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Protocol


class CheckpointTarget(Protocol):
    """Where checkpoints go: app.store.history.History."""

    def checkpoint_assistant(self, message_id: str, content: str) -> bool: ...


# A checkpoint is written when a token arrives at least this long after the last one, so a
# crash loses at most this interval plus one token's gap and the write: under one second.
CHECKPOINT_INTERVAL_S = 0.75


class Checkpointer:
    """Rate-limits checkpoints of one streaming reply: at most one write per interval.

    Called on the thread that owns the History. A failed write (disk full, busy) is
    remembered in `last_error` and retried at the next interval; the text stays in memory.
    """

    def __init__(
        self,
        history: CheckpointTarget,
        message_id: str,
        interval_s: float = CHECKPOINT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._history = history
        self._message_id = message_id
        self._interval_s = interval_s
        self._clock = clock
        self._last_write = clock()  # the row was just created with empty text
        self._written = ""
        self.last_error: sqlite3.Error | None = None

    @property
    def saved_chars(self) -> int:
        """How many characters of the reply the history file holds (its last checkpoint)."""
        return len(self._written)

    def due(self) -> bool:
        """True when an update() now would write (lets a caller skip building the text)."""
        return self._clock() - self._last_write >= self._interval_s

    def update(self, text: str) -> bool:
        """Write `text` if at least `interval_s` passed since the last write; True if written."""
        now = self._clock()
        if now - self._last_write < self._interval_s or text == self._written:
            return False
        self._last_write = now
        try:
            written = self._history.checkpoint_assistant(self._message_id, text)
        except sqlite3.Error as exc:
            self.last_error = exc
            return False
        if written is False:  # the row was finished meanwhile: nothing more to save into it
            return False
        self._written = text
        self.last_error = None
        return True

    def flush(self, text: str) -> bool:
        """Write `text` now unless it is already saved; True if written. Raises on failure."""
        if text == self._written:
            return False
        self._history.checkpoint_assistant(self._message_id, text)
        self._last_write = self._clock()
        self._written = text
        self.last_error = None
        return True
