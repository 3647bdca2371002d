"""When Python's cyclic garbage collector may make a full pass: never while a reply streams.

The automatic full (generation 2) passes are switched off; the young generations still collect
on their usual thresholds, and a full pass runs on the UI thread when the window is idle (a
moment after a reply ends, and every minute while none streams), each time only if CPython
would have made one by then, so memory a cycle holds is returned at the next idle moment.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

# A full pass this long after a reply ends (the person is reading, not typing yet) ...
AFTER_REPLY_MS = 1500
# ... and at this interval while no reply streams.
IDLE_EVERY_MS = 60_000
# Generation-2 threshold meaning "never on its own": the count of generation-1 passes
# since the last full pass would have to exceed it.
NEVER = 1 << 30
PYTHON_DEFAULT_GEN2 = 10


class GcPacer(QObject):
    """Owns the collector's generation-2 threshold while the window lives."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        gen0, gen1, gen2 = gc.get_threshold()
        # Another window's pacer may have set NEVER already: restore CPython's default then.
        self._saved = (gen0, gen1, gen2 if gen2 < NEVER else PYTHON_DEFAULT_GEN2)
        self._busy = False
        self._full_passes = 0
        gc.set_threshold(gen0, gen1, NEVER)
        self._after_reply = QTimer(self, singleShot=True, interval=AFTER_REPLY_MS)
        self._after_reply.timeout.connect(self.collect_now)
        self._idle = QTimer(self, interval=IDLE_EVERY_MS)
        self._idle.timeout.connect(self.collect_now)
        self._idle.start()

    @property
    def busy(self) -> bool:
        """Whether a reply streams, as last told by `set_busy`: no full pass runs while it does."""
        return self._busy

    @property
    def full_passes(self) -> int:
        """How many full passes this pacer has run (its own, not CPython's or anyone else's)."""
        return self._full_passes

    def set_busy(self, busy: bool) -> None:
        """A reply started (True) or ended (False)."""
        self._busy = busy
        if busy:
            self._after_reply.stop()
        else:
            self._after_reply.start()

    def collect_now(self) -> None:
        """A full pass, unless a reply is streaming (then the next idle moment does it) or
        CPython would not have made one yet (fewer young passes than its own threshold)."""
        if self._busy or gc.get_count()[2] < self._saved[2]:
            return
        gc.collect()
        self._full_passes += 1

    def stop(self) -> None:
        """Give the collector its own thresholds back (the window is closing)."""
        self._after_reply.stop()
        self._idle.stop()
        gc.set_threshold(*self._saved)
