"""Whether each of the person's servers answers now, for the window: every connection asked at
once on a worker (app/remote/reachability.py) when the window starts, every REFRESH_S while it
runs, and when the person opens the model picker (at most once per MIN_GAP_S); what each said is
kept as its last probe on the UI thread (the history's), and `away` names those that did not
answer, with the sentence why. The picker marks their models, and placement (app/placement/)
sends no reply there. Nothing is asked while there are no connections."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.placement.gather import keep_answers
from app.remote.errors import RemoteProblem
from app.remote.reachability import probe_many
from ui.background import BackgroundJob, run_in_background

REFRESH_S = 60.0
MIN_GAP_S = 10.0


class Reachability(QObject):
    """`check()` asks now (unless a check runs or one ended under MIN_GAP_S ago); `changed` after
    each answer. `away`: {connection name: why it did not answer}."""

    changed = Signal()

    def __init__(self, core: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self.away: dict[str, str] = {}
        self._job: BackgroundJob[Any] | None = None
        self._last = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(int(REFRESH_S * 1000))
        self._timer.timeout.connect(lambda: self.check(force=True))

    def start(self) -> None:
        self._timer.start()
        self.check(force=True)

    def stop(self) -> None:
        self._timer.stop()
        if self._job is not None:
            self._job.drop()
            self._job = None

    def check(self, *, force: bool = False) -> None:
        if self._job is not None and not self._job.done:
            return
        if not force and time.monotonic() - self._last < MIN_GAP_S:
            return
        connections = self.core.connections
        targets = [(c, connections.key(c.name)) for c in connections.list()]
        if not targets:
            return
        gate = self.core.network
        self._job = run_in_background(self, lambda: probe_many(targets, gate), on_done=self._answered, name="cove-reach")

    def _answered(self, answers: dict[str, Any]) -> None:
        self._job = None
        self._last = time.monotonic()
        known = {c.name for c in self.core.connections.list()}
        if self.core.read_only:
            away = {name for name, answer in answers.items() if isinstance(answer, RemoteProblem)}
        else:
            away = keep_answers(self.core.connections, {k: v for k, v in answers.items() if k in known})
        self.away = {name: str(answers[name]) for name in away if name in answers}
        self.changed.emit()
