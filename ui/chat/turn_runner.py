"""The UI thread's side of the window's turn in progress: it launches the `Turn` (app/turn/) on
its own thread (for a model on one of the person's servers through the RemoteEngine RemoteModels
builds, again after the one consent question), polls it once per frame (the Turn writes the
reply) and turns what happened into past-tense signals. The controller owns the rest.

In a turn with tools the loop is deferred: a call's question goes out as `tool_asked` (the
window opens its dialog with `open()`, never a nested loop) and the answer comes back through
`answer_tool`; the call runs on a worker while frames go on, and once a call's rows are written
`tool_step_written` says the conversation changed.

Per-token invariant: the engine's reader thread only queues each token; a frame timer on
the UI thread takes what has arrived (no other thread wakes per token) and emits ONE
`text_received` per frame with that text, so the cost per frame is bounded whatever
the token rate. A reply's reasoning goes the same way, apart: at most one `reasoning_received`
per frame, and one `reasoning_ended` when its answer begins (or it ends).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.core import Core
from app.engine.client import EngineClient, FinishedEvent
from app.engine.request import ReplyRequest
from app.remote.connections import ConnectionProblem
from app.remote.remote_model import RemoteModel
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.database import open_reader
from app.store.history import History
from app.store.save_errors import write_failure
from app.turn.backend import Backend, backend_for
from app.turn.events import (
    ConsentEvent,
    EndEvent,
    LoadedEvent,
    MetricsEvent,
    ReasoningEvent,
    RecheckedEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.turn import Turn
from models.library import InstalledModel, ModelNotFound
from ui.chat.frame_pacer import FRAME_MS, FramePacer
from ui.chat.remote_models import RemoteModels, declined_sentence
from ui.chat.turn_inputs import TurnInputs
from ui.chat.unsaved_replies import UnsavedReplies


class TurnRunner(QObject):
    """`begin(record, ...)` then `launch(model, conversation_id)`; `record` and `turn` are the
    turn in progress (None between turns). What a turn reads from outside the runner (its
    settings, tools, documents, the engine's gate) is `inputs` (ui/chat/turn_inputs.py)."""

    text_received = Signal(str, str, int)  # message id, text that arrived this frame, tokens in it
    # message id, reasoning that arrived this frame, time.perf_counter() when its first piece arrived
    reasoning_received = Signal(str, str, float)
    reasoning_ended = Signal(str, float)  # message id, ms it thought: its answer began (or the reply ended)
    first_text_shown = Signal(float)  # ms from send to the first visible character
    first_figures = Signal(dict)  # what the first token made known (app.turn.events.MetricsEvent)
    launching = Signal(object)  # the InstalledModel whose turn starts now (its thread loads it if needed)
    model_loaded = Signal(object)  # LoadedModel: the turn's thread loaded the model
    model_rechecked = Signal(object)  # the InstalledModel entry naming its file's new bytes
    failed_before_reply = Signal(str)  # sentence: the turn failed before a model ran it
    error_reported = Signal(str)  # sentence for the person
    finished = Signal(object)  # the final assistant Message; the runner is free again
    tool_asked = Signal(object)  # app.turn.events.ToolCallEvent whose `question` waits for answer_tool
    tool_step_written = Signal()  # a tool call and its result were written (and the next reply begun)

    def __init__(
        self,
        core: Core,
        engine: EngineClient,
        remote: RemoteModels,
        unsaved: UnsavedReplies,
        inputs: TurnInputs,
        *,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.core = core
        self.engine = engine
        self.remote = remote
        self.unsaved = unsaved
        self.inputs = inputs  # replaced (not changed) by the ChatController as features provide theirs
        self.record: TurnRecord | None = None
        self.turn: Turn | None = None
        self.backend: Backend | None = None  # what the turn in progress runs behind, once launched
        self._first_shown = False
        self._thinking_since: float | None = None  # when the reply in progress began its reasoning, until it answers
        self._shut_down = False
        # Frames of streamed text: every FRAME_MS, or in step with steady tokens (FramePacer).
        self._drain = QTimer(self)
        self._drain.setSingleShot(True)
        self._drain.setTimerType(Qt.TimerType.PreciseTimer)
        self._drain.timeout.connect(self._drain_events)
        self._pacer = FramePacer()

    @property
    def loading_here(self) -> bool:
        """The turn in progress runs on this machine's engine (it may be loading its model)."""
        return self.turn is not None and self.backend is not None and self.backend.installed is not None

    def begin(self, record: TurnRecord, db_path: Path, conversation_id: str, system_prompt: str | None) -> None:
        """Take `record` as the turn in progress; its prompt is built later, on the turn's thread."""
        upto = record.user.id
        try:  # the conversation's documents (ui/documents/feature.py), read here; their passages are found on the turn's thread
            documents = self.inputs.docs_for(conversation_id)
        except Exception as exc:  # noqa: BLE001 - e.g. the index could not be read: the reply goes on without
            self.error_reported.emit(f"The conversation's documents could not be prepared ({exc}); this reply is given none.")
            documents = None
        record.docs = documents

        def prompt_messages() -> list[dict]:  # runs on the turn's thread, with its own reader
            reader = open_reader(db_path)
            try:
                messages = build_prompt_messages(History(reader), conversation_id, system_prompt, upto=upto)
            finally:
                reader.close()
            return documents.apply(messages) if documents is not None else messages

        self.record = record
        try:
            tools = self.inputs.tools_for(conversation_id)
        except Exception as exc:  # noqa: BLE001 - e.g. the tool servers could not be read: the reply goes on
            self.error_reported.emit(f"The conversation's tools could not be prepared ({exc}); this reply has none.")
            tools = None
        self.turn = Turn(
            record,
            self._request(conversation_id, self.inputs.params()),
            messages=prompt_messages,
            library=self.core.library,
            tools=tools,
            images=self.core.history.images,  # where the engine reads the conversation's image files
        )
        self.backend = None
        self._first_shown = False
        self._thinking_since = None

    def launch(self, model: InstalledModel | RemoteModel, conversation_id: str) -> None:
        """Start the turn's thread (again, after the person agreed to send to a server)."""
        turn = self.turn
        assert turn is not None
        params = self.inputs.params()
        if isinstance(model, RemoteModel):  # the same model file may be on another of the person's machines
            model = self.remote.place(model, conversation_id)
        try:  # a server's connection and key, or a model's load settings, are read here, on the history's thread
            backend = backend_for(
                model, engine=self.engine, remote_engine=self.remote.engine_for, options=self.inputs.options, n_ctx=params.n_ctx
            )
        except ConnectionProblem as exc:
            self._ended(turn.fail(str(exc)))
            return
        self.backend = backend
        if backend.installed is not None:
            self.launching.emit(backend.installed)
        turn.request = self._request(conversation_id, params)
        turn.gate = self.inputs.gate() if backend.installed is not None else None
        turn.launch(backend)
        self._pacer.reset()
        self._drain.start(FRAME_MS)

    def _request(self, conversation_id: str, params: SamplingParams) -> ReplyRequest:
        """The window's reply's request (its messages are read on the turn's thread). The window's
        own reply goes first on an engine it shares with API clients, unless the person chose to
        treat all replies alike (the Server panel; app/settings.py window_first)."""
        priority = "window" if self.core.settings.window_first else "normal"
        return ReplyRequest(sampling=params.sampling(), conversation_id=conversation_id, priority=priority)

    def cancel(self) -> None:
        if self.turn is not None:
            self.turn.cancel()

    def answer_tool(self, call_id: str, verdict: str) -> None:
        """The person's answer to a `tool_asked` question; the next frame goes on with the turn."""
        if self.turn is not None:
            self.turn.answer(call_id, verdict)

    def _drain_events(self) -> None:
        started = time.perf_counter()
        turn, record = self.turn, self.record
        if turn is None or record is None:
            self._drain.stop()
            return
        parts: list[str] = []
        arrivals: list[float] = []
        thought: list[str] = []  # reasoning this frame, from `thought_at` on
        thought_at = answer_at = 0.0
        figures: dict | None = None
        end: EndEvent | None = None
        asked: ToolCallEvent | None = None
        stepped = False
        for event in turn.poll():  # the text is written into the record as it is taken
            if isinstance(event, (ToolCallEvent, ToolResultEvent)):  # the reply before is written: reloaded below
                stepped, parts, arrivals, thought = True, [], [], []
                self._thinking_since = None
                if isinstance(event, ToolCallEvent) and event.question is not None:
                    asked = event
            elif isinstance(event, ReasoningEvent):
                if not thought:
                    thought_at = event.t
                if self._thinking_since is None:
                    self._thinking_since = event.t
                thought.append(event.text)
            elif isinstance(event, TextEvent):
                parts.append(event.text)  # "" for a token that was reasoning: counted, not shown
                arrivals.append(event.t)
                if event.text and self._thinking_since is not None and not answer_at:
                    answer_at = event.t
            elif isinstance(event, MetricsEvent):
                figures = event.figures
            elif isinstance(event, LoadedEvent):
                self.model_loaded.emit(event.loaded)
            elif isinstance(event, RecheckedEvent):
                self._rechecked(event)
            elif isinstance(event, ConsentEvent):
                QTimer.singleShot(0, lambda: self._ask_consent(turn, event))  # outside this frame
                return
            elif isinstance(event, EndEvent):
                end = event
        notes = self.inputs.notes
        while notes:
            self.error_reported.emit(notes.popleft())
        if stepped:
            self.tool_step_written.emit()
        if asked is not None:
            self.tool_asked.emit(asked)
        reasoning = "".join(thought)
        if reasoning:
            self.reasoning_received.emit(record.assistant.id, reasoning, thought_at)
        if answer_at and self._thinking_since is not None:
            self.reasoning_ended.emit(record.assistant.id, (answer_at - self._thinking_since) * 1000.0)
            self._thinking_since = None
        if parts or reasoning:
            text = "".join(parts)
            if parts:
                self.text_received.emit(record.assistant.id, text, len(parts))
            if not self._first_shown and (text or reasoning):  # the first visible character: "Thinking…" too
                self._first_shown = True
                self.first_text_shown.emit((time.perf_counter() - turn.t0) * 1000.0)
                if figures:
                    self.first_figures.emit(figures)
        if end is not None:
            self._ended(end)
        else:  # counted from this frame's start, as a repeating timer would (not from its end)
            delay = self._pacer.next_delay_ms(started, arrivals) - (time.perf_counter() - started) * 1000
            self._drain.start(max(1, round(delay)))

    def _ask_consent(self, turn: Turn, event: ConsentEvent) -> None:
        """Messages would go to a host outside the private network for the first time: ask; on
        yes start the turn again (nothing was sent yet), else end it with the reason."""
        if self.turn is not turn or self._shut_down:
            return
        agreed = self.remote.consent(event)
        if self.turn is not turn or self._shut_down:
            return
        conversation_id = self.inputs.conversation_id()
        backend = self.backend
        if turn.cancel_requested:  # Stop while the question was up
            self._ended(turn.end_reply(FinishedEvent("", MessageStatus.CANCELLED, {})))
        elif agreed and conversation_id is not None and backend is not None:
            self.launch(backend.model, conversation_id)
        else:
            self._ended(turn.fail(declined_sentence(event.host)))

    def _rechecked(self, event: RecheckedEvent) -> None:
        """The model file changed under Cove: its entry and this reply now name its new bytes."""
        recheck = event.recheck
        if event.error is not None:
            exc = event.error
            reason = (
                "it is no longer in the library"
                if isinstance(exc, ModelNotFound)
                else write_failure(exc)
                if isinstance(exc, sqlite3.Error)
                else str(exc)
            )
            self.error_reported.emit(f"The model file changed, and {reason}, so the new checksum is not recorded.")
            return
        self.model_rechecked.emit(event.updated)
        if recheck.content_changed:
            sentence = recheck.sentence()
            self.error_reported.emit(sentence[:1].upper() + sentence[1:] + ".")

    def _ended(self, end: EndEvent) -> None:
        """The Turn has written its end. Invariant: the turn is released on every path (a full
        disk included), so Stop, Esc and Send work again; a reply the file cannot take stays in
        memory and is retried."""
        record = self.record
        assert record is not None
        if end.before_reply and record.ran_on is None:
            self.failed_before_reply.emit(end.message.error or "")
        if record.docs is not None and record.docs.problem:
            self.error_reported.emit(record.docs.problem)
        if self._thinking_since is not None:  # it ended still thinking (stopped, cut off)
            self.reasoning_ended.emit(record.assistant.id, (time.perf_counter() - self._thinking_since) * 1000.0)
            self._thinking_since = None
        if end.not_saved is not None:
            self.unsaved.keep(record)
            self.error_reported.emit(
                f"The reply could not be saved: {end.not_saved}. It stays on screen, and Cove saves it as soon as there is space again."
            )
        self.record, self.turn, self.backend = None, None, None
        self._drain.stop()
        self.finished.emit(end.message)

    def quit(self, grace_s: float) -> None:
        """On quit: stop the reply and keep its text as 'interrupted'."""
        self._shut_down = True
        turn, record = self.turn, self.record
        if turn is not None and record is not None:
            end = turn.abandon(grace_s)
            if end.not_saved is not None:
                self.unsaved.keep(record)
                print(f"cove: the reply in progress could not be saved at quit: {end.not_saved}", file=sys.stderr)
            self.record, self.turn, self.backend = None, None, None
        self._drain.stop()
