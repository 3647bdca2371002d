"""The window's side of chat: it owns the open conversation and the part of it shown, the
chosen model (on Auto, the one chosen for each message: ui/chat/auto_mode.py; what Auto learns from
the person: ui/chat/auto_learning.py) and its background load, and starts each turn (TurnRunner
runs it); it writes the history (the UI thread is its only writer) and tells the widgets what
happened through past-tense signals.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.core import Core, NoModelError
from app.engine.client import EngineClient, LoadedModel
from app.load_options import LoadOptions, load_options
from app.remote.remote_model import RemoteModel
from app.routing.auto import AutoChoice, is_auto
from app.serve.pool.machine import default_slots
from app.settings import SamplingParams
from app.store.history import Conversation, Message
from app.store.save_errors import write_failure
from app.turn.backend import installed_model, on_server, ready_without_load
from app.turn.record import TurnRecord
from app.turn.tools import ToolLoop
from models.library import InstalledModel
from ui.background import run_in_background
from ui.chat.attachments import Attachment
from ui.chat.auto_learning import AutoLearning
from ui.chat.auto_mode import AutoMode, AutoRefused
from ui.chat.auto_regenerate import CannotRegenerate, regeneration, replied_to
from ui.chat.image_send import ImagesNotKept, image_refusal, keep_images
from ui.chat.remote_models import AskConsent, RemoteModels
from ui.chat.shown_messages import PAGE, ShownMessage, newest_part
from ui.chat.starter_preparer import StarterPreparer, starter_file_needed
from ui.chat.turn_inputs import DocumentsFor, EngineGate, TurnInputs
from ui.chat.turn_runner import TurnRunner
from ui.chat.unsaved_replies import UnsavedReplies
from ui.tools.chat_tools import PARAMS_KEY, ChatTools, enabled_servers


class ChatController(QObject):
    conversations_changed = Signal()
    conversation_opened = Signal(str)  # conversation id
    messages_reloaded = Signal(list)  # list[ShownMessage], the shown part of the current branch
    messages_appended = Signal(list)  # list[ShownMessage] added at the end (a new turn)
    reply_started = Signal(object)  # the assistant Message (status 'streaming')
    reply_text_received = Signal(str, str, int)  # message id, text that arrived this frame, tokens in it
    reply_reasoning_received = Signal(str, str, float)  # message id, reasoning this frame, perf_counter() of its first piece
    reply_reasoning_ended = Signal(str, float)  # message id, ms the reply thought (its answer began, or it ended)
    reply_finished = Signal(object)  # the final assistant Message
    busy_changed = Signal(bool)
    model_load_started = Signal(str)  # model name
    model_loaded = Signal(object)  # LoadedModel
    model_load_failed = Signal(str)  # sentence
    error_reported = Signal(str)  # sentence for the person
    first_text_shown = Signal(float)  # ms from send to the first visible character
    first_figures = Signal(dict)  # the reply's time to first token and prompt figures, at its first token
    notice_changed = Signal(str)  # a passing note for the person ("" clears it)
    models_changed = Signal()  # the library changed (e.g. the starter was registered)
    tool_asked = Signal(object)  # app.turn.events.ToolCallEvent: a call waits for the person's answer
    tool_servers_changed = Signal(list)  # names of the tool servers on for the open conversation

    def __init__(self, core: Core, engine: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self.engine = engine
        self.conversation_id: str | None = None
        self.model: InstalledModel | RemoteModel | None = None
        self.remote = RemoteModels(core)  # models on the person's own servers (no load, no engine)
        self.auto = AutoMode(core)  # on Auto, each message's model is chosen for it (self.model: the last chosen)
        self.learning = AutoLearning(core, self)  # a kept "Regenerate with …", an "Always …": Auto's next choices
        self.learning.failed.connect(self.error_reported)
        self.learning.told.connect(self.notice_changed)
        self.learning.changed.connect(self._on_auto_learned)
        self.loaded: LoadedModel | None = None
        self._shown_count = PAGE
        self._has_earlier = False
        self._loading: InstalledModel | None = None
        self.load_error: str | None = None  # why the chosen model last failed to load, if it did
        self._shut_down = False
        self.starter = StarterPreparer(core, self)  # assembles the starter model on a first start
        self.starter.ready.connect(self._on_starter_ready)
        self.starter.failed.connect(self._on_starter_failed)
        self._loaded_model: InstalledModel | None = None
        # Replies the history file could not take when they ended (a full disk), retried.
        self.unsaved = UnsavedReplies(self)
        self.unsaved.saved.connect(self._on_unsaved_saved)
        # The turn in progress: its thread, its frames of text and the end of its record.
        self._told: set[str] = set()  # load notices said already (a draft model that is gone), once each
        # What a turn reads from outside its runner: the controller's own readers here, the
        # features' through provide_tools, provide_documents and provide_engine_gate.
        inputs = TurnInputs(params=self.params, options=self.load_options, conversation_id=lambda: self.conversation_id)
        self.turns = TurnRunner(core, engine, self.remote, self.unsaved, inputs, parent=self)
        self.turns.text_received.connect(self.reply_text_received)
        self.turns.reasoning_received.connect(self.reply_reasoning_received)
        self.turns.reasoning_ended.connect(self.reply_reasoning_ended)
        self.turns.first_text_shown.connect(self.first_text_shown)
        self.turns.first_figures.connect(self.first_figures)
        self.turns.error_reported.connect(self.error_reported)
        self.turns.launching.connect(self._on_turn_launching)
        self.turns.model_loaded.connect(self._on_turn_loaded)
        self.turns.model_rechecked.connect(self._on_turn_rechecked)
        self.turns.failed_before_reply.connect(self._on_turn_failed_before_reply)
        self.turns.finished.connect(self._on_turn_finished)
        self._tools: ChatTools | None = None  # the conversations' tools, once provided (provide_tools)
        self.turns.tool_asked.connect(self.tool_asked)
        self.turns.tool_step_written.connect(self._on_tool_step)
        self._stepped = False  # the turn in progress wrote tool rows (its end may be a row not shown yet)

    # ---- what the features provide to each turn (ui/chat/turn_inputs.py) ----------------

    def provide_tools(self, tools: ChatTools) -> None:
        """The conversations' tools (the Tools feature): each turn gets its conversation's, and
        the sentences their servers leave (`tools.notes`) are shown while a turn runs."""
        self._tools = tools
        self.turns.inputs = replace(self.turns.inputs, tools_for=self._tools_for, notes=tools.notes)

    def provide_documents(self, docs_for: DocumentsFor) -> None:
        """The documents of a turn of a conversation (the Documents feature)."""
        self.turns.inputs = replace(self.turns.inputs, docs_for=docs_for)

    def provide_engine_gate(self, gate: EngineGate) -> None:
        """The gate a turn borrows the engine through while the Server switch's pool shares it
        with API requests (ui/server/shared_engine.py); it also sizes the engine's slots
        (`load_options`)."""
        self.turns.inputs = replace(self.turns.inputs, gate=gate)

    def provide_consent(self, ask: AskConsent) -> None:
        """How the person is asked before messages first go to a server outside the private
        network (the window's dialog, parented to it)."""
        self.remote.ask_consent = ask

    # ---- state -------------------------------------------------------------------------

    @property
    def preparing_starter(self) -> bool:
        """The starter model file is being assembled (first start)."""
        return self.starter.preparing

    @property
    def starter_error(self) -> str | None:
        """Why assembling the starter model failed, if it did."""
        return self.starter.error

    @property
    def busy(self) -> bool:
        return self.turns.record is not None

    @property
    def streaming_message_id(self) -> str | None:
        record = self.turns.record
        return record.assistant.id if record is not None else None

    def conversation(self) -> Conversation | None:
        return self.core.history.get_conversation(self.conversation_id) if self.conversation_id else None

    def params(self) -> SamplingParams:
        conversation = self.conversation()
        base = self.core.settings.sampling
        if conversation is None or not conversation.params:
            return base
        return SamplingParams.from_dict({**base.to_dict(), **conversation.params})

    def load_options(self, model: InstalledModel) -> LoadOptions:
        """`model`'s load settings for its next load (reads the library: call on the UI thread). A
        draft model that is gone is left out and said once, as a notice; the turn goes on."""
        placement = self.core.settings.placement_for(model.name)
        options = load_options(self.core.library, model, placement)
        # The API shares this engine while the server runs: as many slots for it as fit (models/slots.py),
        # and one more, which the server keeps for the window's own turn while the window goes first.
        if self.turns.inputs.gate() is not None:
            api = default_slots(model, self.params().n_ctx, placement)
            options = replace(options, parallel=api + (1 if self.core.settings.window_first else 0))
        if options.notice and options.notice not in self._told:
            self._told.add(options.notice)
            self.notice_changed.emit(options.notice)
        return options

    def system_prompt(self) -> str | None:
        conversation = self.conversation()
        return conversation.system_prompt if conversation else None

    # ---- conversations -----------------------------------------------------------------

    def start(self) -> None:
        """At window start: the last conversation and the last (else the starter) model. On a
        first start the starter model is assembled on a worker thread, so the window stays live."""
        self.model = self.remote.last_model()  # a model on one of the person's servers, chosen last time
        self.auto.restore()  # Auto chosen last time: the model below is only the one to preload
        if starter_file_needed(self.core):
            self.notice_changed.emit("Preparing the starter model (253 MB, first start only)…")
            self.starter.start()
        elif self.model is None:
            try:
                self.model = self.core.resolve_model(None)
            except NoModelError as exc:
                self.error_reported.emit(str(exc))
            except Exception as exc:  # noqa: BLE001 - a sentence, the window stays up
                self.error_reported.emit(str(exc))
        last = self.core.history.last_conversation()
        if last is not None:
            self.open_conversation(last.id)
        self.conversations_changed.emit()

    def open_conversation(self, conversation_id: str, *, focus_message: str | None = None) -> None:
        self.conversation_id = self.core.history.get_conversation(conversation_id).id
        self._shown_count = PAGE
        self.conversation_opened.emit(self.conversation_id)
        self.tool_servers_changed.emit(self.tool_servers())
        self.reload_messages(focus_message=focus_message)

    def new_conversation(self) -> None:
        """A fresh, empty chat; it is written to the history with its first message."""
        self.conversation_id = None
        self._has_earlier = False
        self.conversation_opened.emit("")
        self.tool_servers_changed.emit([])
        self.messages_reloaded.emit([])

    def reload_messages(self, *, focus_message: str | None = None) -> None:
        self.messages_reloaded.emit(self.shown_messages(focus_message=focus_message))

    @property
    def has_earlier(self) -> bool:
        """Older messages of this conversation are not shown yet (see load_earlier)."""
        return self._has_earlier

    def load_earlier(self) -> None:
        if self._has_earlier and not self.busy:
            self._shown_count += PAGE
            self.reload_messages()

    def shown_messages(self, *, focus_message: str | None = None) -> list[ShownMessage]:
        """The newest part of the current branch (at least PAGE messages, more once the person
        scrolled up, and always reaching back to `focus_message`): opening a 10,000-message
        conversation reads one light outline and the text of only what is shown."""
        if self.conversation_id is None:
            return []
        shown, start, self._shown_count = newest_part(self.core.history, self.conversation_id, self._shown_count, focus_message)
        self._has_earlier = start > 0
        return shown

    def update_settings(self, params: SamplingParams, system_prompt: str | None) -> None:
        if self.conversation_id is None:
            self.conversation_id = self.core.history.create_conversation(model=self.model.name if self.model else None).id
            self.conversation_opened.emit(self.conversation_id)
        kept = {PARAMS_KEY: self.tool_servers()} if self.tool_servers() else {}  # not a sampling setting: kept
        self.core.history.update_conversation(self.conversation_id, params={**params.to_dict(), **kept}, system_prompt=system_prompt)
        self.core.save_sampling_defaults(params)

    # ---- tools -------------------------------------------------------------------------

    def tool_servers(self) -> list[str]:
        """The tool servers on for the open conversation."""
        return enabled_servers(self.conversation())

    def set_tool_servers(self, names: list[str]) -> None:
        """Turn tool servers on or off for the open conversation (a new chat is written now)."""
        if self.conversation_id is None:
            model = self.model.name if self.model else None
            self.conversation_id = self.core.history.create_conversation(model=model).id
            self.conversation_opened.emit(self.conversation_id)
            self.conversations_changed.emit()
        conversation = self.conversation()
        params = dict(conversation.params or {}) if conversation is not None else {}
        params[PARAMS_KEY] = list(dict.fromkeys(names))
        self.core.history.update_conversation(self.conversation_id, params=params)
        self.tool_servers_changed.emit(self.tool_servers())

    def answer_tool(self, call_id: str, verdict: str) -> None:
        """The person's answer to a tool call's question (app.mcp.approval ALLOW_ONCE, ALWAYS, DENY)."""
        self.turns.answer_tool(call_id, verdict)

    def _tools_for(self, conversation_id: str) -> Callable[[], ToolLoop | None] | None:
        """How the turn of this conversation gets its tools (read now, on the UI thread)."""
        if self._tools is None:
            return None
        conversation = self.core.history.get_conversation(conversation_id)
        return self._tools.loop_for(conversation)

    # ---- turns -------------------------------------------------------------------------

    def send(self, text: str, images: Sequence[Attachment] = ()) -> bool:
        """Start a turn with the person's text and images. False (and a sentence) if it cannot
        start, a model that cannot see the images included (before anything is written); True
        once the message is safely in the history (the composer may clear then)."""
        if (not text.strip() and not images) or self.busy:
            return False
        if self.conversation_id is not None:
            self.learning.learn_kept(self.conversation_id)  # before the choice: this message's uses it
        model, choice = self._model_for(text, images)
        if model is None or self._refused_images(model, images):
            return False
        self.unsaved.retry()  # a reply the disk could not take before goes first
        try:
            kept = keep_images(self.core.history.images, images)  # the files first: the row names them
            if self.conversation_id is None:
                conversation = self.core.history.create_conversation(model=model.name, params=None)
                self.conversation_id = conversation.id
                self.conversation_opened.emit(conversation.id)
            auto = choice.record() if choice is not None else None
            record = TurnRecord.begin(
                self.core.history, self.conversation_id, text, model=model, params=self.params(), images=kept, auto=auto
            )
        except ImagesNotKept as exc:
            self.error_reported.emit(str(exc))
            return False
        except sqlite3.Error as exc:
            self.error_reported.emit(
                f"Your message could not be saved: {write_failure(exc)}. It stays in the box below; send it again when there is space."
            )
            return False
        self._start(record, appended=True)
        return True

    def regenerate(self, assistant_message_id: str) -> None:
        """A new version of a reply (Retry for a failed one): the old version is kept."""
        if self.busy:
            return
        model = self._model_or_report()
        if model is None:
            return
        parent_id = replied_to(self.core.history, assistant_message_id)
        if parent_id is None or self._refused_images(model, ()):
            return
        self._start(TurnRecord.regenerate(self.core.history, parent_id, model=model, params=self.params()))

    def regenerate_with(self, assistant_message_id: str, name: str) -> None:
        """A new version of an Auto reply, written by the model `name` instead of Auto's choice
        (ui/chat/auto_regenerate.py); off Auto, `name` becomes the chosen model, as in the picker."""
        if self.busy:
            return
        try:
            again = regeneration(self.core, self.remote, assistant_message_id, name)
        except CannotRegenerate as exc:
            self.error_reported.emit(str(exc))
            return
        if self._refused_images(again.model, ()):
            return
        self.model = again.model
        if not self.auto.on and isinstance(again.model, RemoteModel):
            self.remote.remember(again.model)
        elif not self.auto.on and isinstance(again.model, InstalledModel):
            self.core.remember_model(again.model)
        record = TurnRecord.regenerate(self.core.history, again.user_message_id, model=again.model, params=self.params(), auto=again.auto)
        self._start(record)

    def always_use(self, assistant_message_id: str) -> None:
        """The person chose "Always MODEL for KIND" on an Auto reply: Auto uses its model for its kind of task from now on."""
        self.learning.learn_asked(assistant_message_id)

    def edit_and_resend(self, user_message_id: str, text: str, images: Sequence[Attachment] = ()) -> bool:
        """The edited message (with `images`) becomes a new version beside the original, then gets a reply."""
        if self.busy or (not text.strip() and not images) or self.conversation_id is None:
            return False
        model, choice = self._model_for(text, images)
        if model is None or self._refused_images(model, images):
            return False
        try:
            kept = keep_images(self.core.history.images, images)
        except ImagesNotKept as exc:
            self.error_reported.emit(str(exc))
            return False
        record = TurnRecord.begin(
            self.core.history,
            self.conversation_id,
            text,
            model=model,
            params=self.params(),
            edit_of=user_message_id,
            images=kept,
            auto=choice.record() if choice is not None else None,
        )
        self._start(record)
        return True

    def switch_version(self, message_id: str, delta: int) -> None:
        siblings = self.core.history.siblings(message_id)
        ids = [m.id for m in siblings]
        if message_id not in ids or self.busy:
            return
        target = ids[max(0, min(len(ids) - 1, ids.index(message_id) + delta))]
        self.core.history.select_branch(target)
        self.reload_messages()

    def stop(self) -> None:
        self.turns.cancel()

    def choose_model(self, name: str) -> None:
        """Use this model from the next turn on; it loads in the background now (a model on a
        server needs no load); "auto": Auto chooses the model for each message."""
        if is_auto(name):
            self.auto.choose()
            return
        self.auto.on = False
        try:
            self.model = self.remote.choose(name)
        except Exception as exc:  # noqa: BLE001
            self.error_reported.emit(str(exc))

    def _on_starter_ready(self, model: InstalledModel) -> None:
        self.notice_changed.emit("")
        if on_server(self.model):  # a server's model is in use: the starter waits in the picker
            self.models_changed.emit()
            return
        self.model = model
        self.core.remember_model(model)
        self.models_changed.emit()
        self.preload_model()

    def _on_starter_failed(self, error: str) -> None:
        self.notice_changed.emit("")
        self.error_reported.emit(error)

    def preload_model(self) -> None:
        """Load the chosen model now, in the background, so the first reply starts sooner.
        If it fails, the previously loaded model stays the one used."""
        model = installed_model(self.model)  # a server's model needs no load
        if model is None or self.busy or self._loading is not None:
            return
        if self.loaded is not None and self.loaded.path == model.path:
            return
        previous = self._loaded_model
        self._loading = model
        self.model_load_started.emit(model.name)
        n_ctx = self.params().n_ctx  # read here: the history's connection belongs to this (the UI) thread
        arguments = self.load_options(model).load_arguments()

        run_in_background(
            self,
            lambda: self.engine.load(model.path, n_ctx=n_ctx, **arguments),  # the engine client is thread-safe
            on_done=lambda loaded: self._on_load_done(model, loaded, "", previous),
            on_failed=lambda sentence: self._on_load_done(model, None, sentence, previous),
            name="cove-load",
        )

    def cancel_load(self) -> None:
        """Stop a model load in progress (the engine process is stopped and restarted later)."""
        if self._loading is not None or (self.turns.loading_here and self.loaded is None):
            self.engine.abort()

    def _on_load_done(self, model: InstalledModel, loaded: LoadedModel | None, error: str, previous: InstalledModel | None) -> None:
        self._loading = None
        if self._shut_down:
            return  # a load that ended after quitting (the engine was closed under it)
        if loaded is not None:
            self.loaded = loaded
            self._loaded_model = model
            self.load_error = None
            self.model_loaded.emit(loaded)
            return
        if self.model is model and previous is not None:
            self.model = previous  # the last model that worked stays in use
            if not self.auto.on:  # on Auto, Auto stays the remembered choice
                self.core.remember_model(previous)
        elif self.model is model:
            self.load_error = error  # no model that works: the chosen one is not ready
        self.model_load_failed.emit(error)

    def _model_or_report(self) -> InstalledModel | RemoteModel | None:
        if self.model is None:
            try:
                self.model = self.core.resolve_model(None)
            except Exception as exc:  # noqa: BLE001
                self.error_reported.emit(str(exc))
                return None
        return self.model

    def _model_for(self, text: str, images: Sequence[Attachment]) -> tuple[InstalledModel | RemoteModel | None, AutoChoice | None]:
        """The model for this message: on Auto, Auto's choice (then the model in use, loaded by the
        turn if it must be) and the choice; else the chosen model. (None, None) once said why not."""
        if not self.auto.on:
            return self._model_or_report(), None
        try:
            loaded = self.loaded.path if self.loaded is not None else None
            tools = bool(self.tool_servers())
            remote, away = self.remote.models(), self.remote.away  # the person's servers: Auto's candidates too
            model, choice = self.auto.for_message(
                text, images, self.conversation_id, self.params(), tools=tools, loaded=loaded, remote=remote, away=away
            )
        except AutoRefused as exc:
            self.error_reported.emit(str(exc))
            return None, None
        self.model = model
        return model, choice

    def _refused_images(self, model: InstalledModel | RemoteModel, images: Sequence[Attachment]) -> bool:
        """Say so, and True, when the turn has images (the message's, or the conversation's) the
        model cannot see (ui/chat/image_send.py)."""
        sentence = image_refusal(model, model.name, images, self.core.history, self.conversation_id)
        if sentence:
            self.error_reported.emit(sentence)
        return bool(sentence)

    def _start(self, record: TurnRecord, *, appended: bool = False) -> None:
        """`appended`: a plain new turn at the end, shown by adding two rows (cheap in a long
        chat); an edit or a regenerated reply changes versions, so the view is reloaded."""
        assert self.model is not None and self.conversation_id is not None
        self.turns.begin(record, self.core.paths.database, self.conversation_id, self.system_prompt())
        if appended:
            self.messages_appended.emit([ShownMessage(record.user, 1, 1, True), ShownMessage(record.assistant, 1, 1, True)])
        else:
            self.reload_messages()
        self.reply_started.emit(record.assistant)
        self.busy_changed.emit(True)
        self.conversations_changed.emit()  # listed (and moved to the top) while the reply streams
        self.turns.launch(self.model, self.conversation_id)

    def _on_turn_launching(self, model: InstalledModel) -> None:
        if not ready_without_load(model, self.loaded):
            self.model_load_started.emit(model.name)

    def _on_turn_loaded(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self._loaded_model = installed_model(self.model)
        self.load_error = None
        self.model_loaded.emit(loaded)

    def _on_turn_rechecked(self, updated: InstalledModel) -> None:
        current = installed_model(self.model)
        if current is not None and current.path == updated.path:
            self.model = updated
        self.models_changed.emit()

    def _on_turn_failed_before_reply(self, error: str) -> None:
        if not ready_without_load(self.model, self.loaded):
            self.model_load_failed.emit(error)

    def _on_tool_step(self) -> None:
        self._stepped = True
        self.reload_messages()

    def _on_turn_finished(self, final: Message) -> None:
        stepped, self._stepped = self._stepped, False
        self.reply_finished.emit(final)
        self.busy_changed.emit(False)
        self.conversations_changed.emit()
        if int(final.metrics.get("dropped_turns") or 0) > 0 or stepped:
            self.reload_messages()  # mark the turns the model no longer saw; show a tool turn's last row

    def _on_auto_learned(self) -> None:
        if not self.busy:  # the replies' "Always …" follow what Auto uses now (while a reply streams: from the next reload)
            self.reload_messages()

    def _on_unsaved_saved(self, message: Message) -> None:
        self.notice_changed.emit("The reply that could not be saved is saved now.")
        self.conversations_changed.emit()

    # ---- quitting ----------------------------------------------------------------------

    def shutdown(self, grace_s: float = 1.5) -> None:
        """On quit: stop the reply, keep its text as 'interrupted', stop the engine host."""
        self._shut_down = True
        self.starter.abandoned = True  # a starter file assembled after this is used next start
        self.turns.quit(grace_s)
        if not self.unsaved.retry():
            print(
                f"cove: {len(self.unsaved.pending)} finished reply could not be saved (the history file is still not writable).",
                file=sys.stderr,
            )
        self.engine.close()
