"""The UI thread's side of the window's turn in progress: it starts the turn's thread (for a
model on one of the person's servers through the RemoteEngine RemoteTurns builds, again after
the one consent question), drains its events once per frame and ends its record. It tells
ChatController what happened through past-tense signals; the controller owns the rest.

Per-token invariant: the engine's reader thread only queues each token; a frame timer on
the UI thread takes what has arrived (no other thread wakes per token) and emits ONE
`text_received` per frame with that text, so the cost per frame is bounded whatever
the token rate.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.chat import TurnRecord, build_prompt_messages
from app.core import Core
from app.engine.client import EngineClient, FinishedEvent, TokenEvent
from app.load_options import LoadOptions
from app.remote.connections import ConnectionProblem
from app.remote.remote_model import RemoteModel
from app.serve.window_gate import WindowGate
from app.settings import SamplingParams
from app.store.database import open_reader
from app.store.history import History
from app.store.save_errors import ReplyNotSaved, write_failure
from app.store.statuses import MessageStatus
from models.library import InstalledModel, ModelNotFound
from ui.chat.frame_pacer import FRAME_MS, FramePacer
from ui.chat.remote_turn import ConsentEvent, RemoteTurns, declined_sentence
from ui.chat.turn_worker import FailedEvent, LoadedEvent, RecheckedEvent, TurnWorker
from ui.chat.unsaved_replies import UnsavedReplies


class TurnRunner(QObject):
    """`begin(record, ...)` then `launch(model, conversation_id)`; `record` and `worker` are the
    turn in progress (None between turns). `params`, `options` (a model's load settings),
    `gate` and `conversation_id` are read at each launch (the relaunch after consent included)."""

    text_received = Signal(str, str, int)  # message id, text that arrived this frame, tokens in it
    first_text_shown = Signal(float)  # ms from send to the first visible character
    first_figures = Signal(dict)  # what the first token made known (TurnWorker.first_figures)
    launching = Signal(object)  # the InstalledModel whose turn starts now (its thread loads it if needed)
    model_loaded = Signal(object)  # LoadedModel: the turn's thread loaded the model
    model_rechecked = Signal(object)  # the InstalledModel entry naming its file's new bytes
    failed_before_reply = Signal(str)  # sentence: the turn failed before a model ran it
    error_reported = Signal(str)  # sentence for the person
    finished = Signal(object)  # the final assistant Message; the runner is free again

    def __init__(self, core: Core, engine: EngineClient, remote: RemoteTurns, unsaved: UnsavedReplies, *,
                 params: Callable[[], SamplingParams], gate: Callable[[], WindowGate | None],
                 conversation_id: Callable[[], str | None], options: Callable[[InstalledModel], LoadOptions],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self.engine = engine
        self.remote = remote
        self.unsaved = unsaved
        self._params = params
        self._options = options
        self._gate = gate
        self._conversation_id = conversation_id
        self.record: TurnRecord | None = None
        self.worker: TurnWorker | None = None
        self._prompt_messages: Callable[[], list[dict]] = list  # the turn's prompt, built on its thread
        self._t_send = 0.0
        self._first_shown = False
        self._shut_down = False
        # Frames of streamed text: every FRAME_MS, or in step with steady tokens (FramePacer).
        self._drain = QTimer(self)
        self._drain.setSingleShot(True)
        self._drain.setTimerType(Qt.TimerType.PreciseTimer)
        self._drain.timeout.connect(self._drain_events)
        self._pacer = FramePacer()

    def begin(self, record: TurnRecord, db_path: Path, conversation_id: str, system_prompt: str | None) -> None:
        """Take `record` as the turn in progress; its prompt is built later, on the turn's thread."""
        self.record = record
        self._t_send = time.perf_counter()
        self._first_shown = False
        upto = record.user.id

        def prompt_messages() -> list[dict]:  # runs on the worker thread, with its own reader
            reader = open_reader(db_path)
            try:
                return build_prompt_messages(History(reader), conversation_id, system_prompt, upto=upto)
            finally:
                reader.close()

        self._prompt_messages = prompt_messages

    def launch(self, model: InstalledModel | RemoteModel, conversation_id: str) -> None:
        """Start the turn's thread (again, after the person agreed to send to a server)."""
        remote = None
        options: LoadOptions | None = None
        if isinstance(model, RemoteModel):
            try:  # the connection and its key are read here, on the history's thread
                remote = self.remote.engine_for(model)
            except ConnectionProblem as exc:
                self._finish(FailedEvent(str(exc)))
                return
        else:
            options = self._options(model)  # from the library, on its thread too
            self.launching.emit(model)
        self.worker = TurnWorker(self.engine, self._prompt_messages, model=model, params=self._params(),
                                 conversation_id=conversation_id,
                                 options=options,
                                 gate=self._gate() if not remote else None,
                                 remote=remote)
        self.worker.start()
        self._pacer.reset()
        self._drain.start(FRAME_MS)

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    def _drain_events(self) -> None:
        started = time.perf_counter()
        worker, record = self.worker, self.record
        if worker is None or record is None:
            self._drain.stop()
            return
        parts: list[str] = []
        arrivals: list[float] = []
        finished: FinishedEvent | FailedEvent | None = None
        for event in worker.take_events():
            if isinstance(event, TokenEvent):
                parts.append(event.text)
                arrivals.append(event.t)
            elif isinstance(event, LoadedEvent):
                self.model_loaded.emit(event.loaded)
            elif isinstance(event, RecheckedEvent):
                self._record_recheck(record, event)
            elif isinstance(event, ConsentEvent):
                QTimer.singleShot(0, lambda: self._ask_consent(worker, event))  # outside this frame
                return
            else:
                finished = event
                break
        if parts:
            text = "".join(parts)
            record.append(text)  # checkpointed at most once a second
            self.text_received.emit(record.assistant.id, text, len(parts))
            if not self._first_shown and text:
                self._first_shown = True
                self.first_text_shown.emit((time.perf_counter() - self._t_send) * 1000.0)
                figures = worker.first_figures()
                if figures:
                    self.first_figures.emit(figures)
        if finished is not None:
            self._finish(finished)
        else:  # counted from this frame's start, as a repeating timer would (not from its end)
            delay = self._pacer.next_delay_ms(started, arrivals) - (time.perf_counter() - started) * 1000
            self._drain.start(max(1, round(delay)))

    def _ask_consent(self, worker: TurnWorker, event: ConsentEvent) -> None:
        """Messages would go to a host outside the private network for the first time: ask; on
        yes start the turn again (nothing was sent yet), else end it with the reason."""
        if self.worker is not worker or self._shut_down:
            return
        agreed = self.remote.consent(event)
        if self.worker is not worker or self._shut_down:
            return
        conversation_id = self._conversation_id()
        if worker.cancel_requested:  # Stop while the question was up
            self._finish(FinishedEvent("", MessageStatus.CANCELLED, {}))
        elif agreed and conversation_id is not None:
            self.launch(worker.model, conversation_id)
        else:
            self._finish(FailedEvent(declined_sentence(event.host)))

    def _record_recheck(self, record: TurnRecord, event: RecheckedEvent) -> None:
        """The model file changed under Cove: its entry and this reply now name its new bytes."""
        recheck = event.recheck
        try:
            # The turn's own model, found by its file: the person may have picked another meanwhile.
            updated = record.record_recheck(self.core.library, self.core.library.get(recheck.path).name, recheck)
        except (sqlite3.Error, ModelNotFound) as exc:
            reason = "it is no longer in the library" if isinstance(exc, ModelNotFound) else write_failure(exc)
            self.error_reported.emit(f"The model file changed, and {reason}, so the new checksum is not recorded.")
            return
        self.model_rechecked.emit(updated)
        if recheck.content_changed:
            sentence = recheck.sentence()
            self.error_reported.emit(sentence[:1].upper() + sentence[1:] + ".")

    def _finish(self, event: FinishedEvent | FailedEvent, status_override: str | None = None) -> None:
        record = self.record
        assert record is not None
        if self.worker is not None:
            record.sent = self.worker.sent
            self.worker.give_back(event.text if isinstance(event, FinishedEvent) else "")
        # Invariant: the turn is released on every path (a full disk included), so Stop, Esc
        # and Send work again; a reply the file cannot take stays in memory and is retried.
        try:
            if isinstance(event, FailedEvent):
                if record.ran_on is None:
                    self.failed_before_reply.emit(event.error)
                final = record.finish(status_override or MessageStatus.ERROR, {}, event.error)
            else:
                metrics: dict[str, Any] = dict(event.metrics)
                metrics["turn_ms"] = round((time.perf_counter() - self._t_send) * 1000.0, 1)
                final = record.finish(status_override or event.status, metrics, event.error, text=event.text)
        except ReplyNotSaved as exc:
            assert record.unsaved is not None
            final = record.unsaved
            self.unsaved.keep(record)
            self.error_reported.emit(
                f"The reply could not be saved: {exc}. It stays on screen, and Cove saves it as soon as there is space again."
            )
        self.record, self.worker = None, None
        self._drain.stop()
        self.finished.emit(final)

    def quit(self, grace_s: float) -> None:
        """On quit: stop the reply and keep its text as 'interrupted'."""
        self._shut_down = True
        worker, record = self.worker, self.record
        if worker is not None and record is not None:
            worker.cancel()
            deadline = time.monotonic() + grace_s
            while worker.is_alive() and time.monotonic() < deadline:
                worker.join(0.05)  # still loading the model or starting the reply
            worker.wait_for_end(max(0.0, deadline - time.monotonic()))
            events = worker.take_events()
            text_parts = [e.text for e in events if isinstance(e, TokenEvent)]
            final = next((e for e in events if isinstance(e, FinishedEvent)), None)
            text = final.text if final is not None else record.text + "".join(text_parts)
            metrics = dict(final.metrics) if final is not None else {}
            try:
                record.finish(MessageStatus.INTERRUPTED, metrics, None, text=text)
            except ReplyNotSaved as exc:
                self.unsaved.keep(record)
                print(f"cove: the reply in progress could not be saved at quit: {exc}", file=sys.stderr)
            self.record, self.worker = None, None
        self._drain.stop()
