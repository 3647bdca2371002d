"""Cove's main window: sidebar | conversation + composer | performance panel, a top bar with
the model picker, and the keyboard shortcuts. It only wires widgets to the ChatController, the
conversation list's actions (ui/shell/conversation_actions.py) and the features; it holds no chat
logic of its own."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QPushButton, QSplitter, QStackedWidget, QToolButton, QVBoxLayout, QWidget

from app.docs.embedding import chat_models
from app.routing.preferences import preferred
from app.statuses import MessageStatus
from app.turn.backend import installed_model, ready_without_load
from ui.chat.auto_learning import always_offer
from ui.chat.auto_mode import auto_note
from ui.chat.auto_regenerate import other_models
from ui.chat.composer import Composer
from ui.chat.controller import ChatController, ShownMessage
from ui.chat.model_picker import (
    ModelPicker,
    _ElidedLabel,  # noqa: PLC2701 - the picker's one-line elided label, reused for the title
)
from ui.chat.presets import PresetStore
from ui.chat.reachability import Reachability
from ui.chat.remote_models import context_figures
from ui.chat.settings_dialog import ConversationSettingsDialog
from ui.conversation.item_model import MessageItem
from ui.conversation.reasoning_rows import finished_reasoning, reasoning_of
from ui.conversation.tool_rows import fold_tool_rows
from ui.conversation.view import ConversationView
from ui.documents.feature import DocumentsFeature
from ui.models_panel.feature import ModelsFeature
from ui.models_panel.panel import ModelsPanel
from ui.perf.memory_poller import MemoryPoller, MemorySample
from ui.perf.panel import PerfPanel
from ui.server.control import ServerFactory
from ui.server.feature import ServerFeature
from ui.shell.conversation_actions import ConversationActions
from ui.shell.gc_pacing import GcPacer
from ui.shell.network_indicator import NetworkIndicator
from ui.shell.notice_area import NoticeArea
from ui.shell.sidebar import Sidebar
from ui.shell.welcome_feature import WelcomeFeature
from ui.tools.feature import ToolsFeature

APP_TITLE = "Cove"


def to_item(shown: ShownMessage, learned: Mapping[str, str] | None = None) -> MessageItem:
    """The view's record of a message; `learned`: the model Auto uses for each kind of task (an Auto
    reply then offers "Always …" for its model when that is not it; None: no "Always …")."""
    m = shown.message
    reply = m.role == "assistant"
    return MessageItem(
        id=m.id,
        role=m.role,
        content=m.content,
        status=m.status,
        model_name=m.model_name,
        metrics=m.metrics,
        error=m.error,
        version_index=shown.version_index,
        version_count=shown.version_count,
        seen_by_model=shown.seen_by_model,
        reasoning=reasoning_of(m),
        images=m.images,
        auto=auto_note(m.params) if reply else "",
        regenerate_with=other_models(m.params) if reply else (),
        always=always_offer(m.params, learned) if reply and learned is not None else None,
    )


class MainWindow(QMainWindow):
    memory_sampled = Signal(object)  # MemorySample, marshalled from the poller thread

    def __init__(
        self,
        controller: ChatController,
        *,
        state_file: Path,
        presets_file: Path,
        confirm_delete: Callable[[str], bool] | None = None,
        downloads=None,
        token_store=None,
        server_factory: ServerFactory | None = None,
    ) -> None:
        super().__init__()
        self.controller = controller
        self.core = controller.core
        self._state = QSettings(str(state_file), QSettings.Format.IniFormat)
        self._presets = PresetStore(presets_file)
        self._editing: str | None = None  # id of the user message being edited
        self._closing = False
        self.setObjectName("coveMainWindow")
        self.setWindowTitle(APP_TITLE)
        self.setAccessibleName("Cove")

        self.sidebar = Sidebar()
        self.view = ConversationView()
        self.composer = Composer()
        self.view.set_image_store(self.core.history.images)  # the messages' thumbnails
        self.perf = PerfPanel()
        self.picker = ModelPicker()
        self.notices = NoticeArea()  # kept start-up notices, then the passing line
        self.notice = self.notices.passing
        self.network_indicator = NetworkIndicator(self.core.network)
        self.statusBar().addPermanentWidget(self.network_indicator)
        # The Models panel's services (token store, Hub worker, downloads); the panel is built on first open.
        self.models = ModelsFeature(
            self,
            controller,
            choose=self._choose_model,
            library_changed=self.refresh_models,
            offline_changed=lambda _offline: self.network_indicator.refresh(),
            downloads=downloads,
            token_store=token_store,
        )
        self.downloads = self.models.downloads
        # The Server switch (off at every start), when the composition root gives a way to make a server.
        self.server = ServerFeature(self, self.core.db, server_factory, core=self.core) if server_factory else None
        self._build_layout()
        # The conversation list: refreshed from the history; the sidebar's search, rename, pin, export, delete.
        self.conversations = ConversationActions(
            self.sidebar,
            controller,
            self.view,
            self,
            status=self.statusBar(),
            notice=self.show_notice,
            title_changed=self.update_title,
            confirm_delete=confirm_delete,
        )
        if self.server is not None:
            self.sidebar.add_footer(self.server.button)
            self.server.conversations_changed.connect(self.conversations.refresh)  # API clients' chats
        self.tools = ToolsFeature(self, self.core)  # the Tools page, the conversation's tools and their questions
        self.sidebar.add_footer(self.tools.button)
        self.tools.attach(controller)
        self.composer.add_leading(self.tools.menu_button)  # the conversation's tool servers, under the box
        self.welcome = WelcomeFeature(self, self.pages)
        self._connect()
        self._shortcuts()
        # Documents: the page, the conversation's collections in a chip above the composer, turns' passages, sources.
        self.documents = DocumentsFeature(self, controller, notice=self.show_notice)
        self.sidebar.add_footer(self.documents.button)
        column = self._column
        column.insertWidget(column.indexOf(self.composer), self.documents.chip, 0, Qt.AlignmentFlag.AlignLeft)
        self.documents.attach(self.view)

        self.poller = MemoryPoller(self.memory_sampled.emit)
        self.memory_sampled.connect(self._on_memory)
        self.poller.start()
        self.gc_pacer = GcPacer(self)  # no full garbage collection mid-reply
        self.controller.busy_changed.connect(self.gc_pacer.set_busy)
        self.reach = Reachability(self.core, self)  # whether each of the person's servers answers now
        self.controller.remote.away = self.reach.away
        self.reach.changed.connect(self._on_reach)
        self.picker.opened.connect(self.reach.check)  # at most once per MIN_GAP_S
        self.refresh_models()
        self._restore_state()
        self.reach.start()

    # ---- layout ------------------------------------------------------------------------

    def _build_layout(self) -> None:
        top = QWidget()
        top.setObjectName("topBar")
        bar = QHBoxLayout(top)
        bar.setContentsMargins(8, 6, 8, 6)
        # Elided ("…") when the bar is narrow: a long title must not widen the window.
        self.title_label = _ElidedLabel()
        self.title_label.setObjectName("conversationTitle")
        self.title_label.setAccessibleName("Conversation title")
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.settings_button = QPushButton("Settings…")
        self.settings_button.setAccessibleName("Conversation settings")
        self.settings_button.setToolTip("System prompt, sampling and context size for this conversation")
        self.models_button = QToolButton()  # a tool button, like Performance: the top bar must fit an 800 px screen
        self.models_button.setText("Models")
        self.models_button.setAccessibleName("Models")
        self.models_button.setToolTip("Find, download, import and delete models (Ctrl+M)")
        self.perf_button = QToolButton()
        self.perf_button.setText("Performance")
        self.perf_button.setCheckable(True)
        self.perf_button.setAccessibleName("Show performance panel")
        bar.addWidget(self.title_label, 1)
        bar.addWidget(self.picker)
        bar.addWidget(self.models_button)
        bar.addWidget(self.settings_button)
        bar.addWidget(self.perf_button)

        center = QWidget()
        col = self._column = QVBoxLayout(center)  # notices, the pages, the composer
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.notices)
        # The conversation (index 0), or the welcome page on a first run; the composer stays
        # below either, so a first message can be typed at once.
        self.pages = QStackedWidget()
        self.pages.addWidget(self.view)
        col.addWidget(self.pages, 1)
        col.addWidget(self.composer)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.perf)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([240, 720, 260])
        self.splitter.setChildrenCollapsible(False)

        root = QWidget()
        outer = QVBoxLayout(root)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(top)
        outer.addWidget(self.splitter, 1)
        self.setCentralWidget(root)
        self.resize(1220, 780)

    def _connect(self) -> None:
        c, s = self.controller, self.sidebar
        c.conversations_changed.connect(self.conversations.refresh)
        c.conversation_opened.connect(self._on_conversation_opened)
        c.messages_reloaded.connect(self._on_messages)
        c.messages_appended.connect(self._on_appended)
        c.reply_started.connect(lambda _m: self.perf.reply_started())
        c.first_figures.connect(self.perf.set_first_figures)
        self.perf.watch_serving(lambda: self.controller.engine.serving())  # the engine it shares with API clients
        c.reply_text_received.connect(self._on_text)
        c.reply_reasoning_received.connect(self.view.append_reasoning)  # collapsed above the answer, never in it
        c.reply_reasoning_ended.connect(self.view.end_reasoning)
        c.reply_finished.connect(self._on_finished)
        c.busy_changed.connect(self.composer.set_busy)
        c.busy_changed.connect(lambda busy: self.poller.set_engine_busy(busy))  # no engine reads mid-reply
        c.model_load_started.connect(lambda name: self.picker.set_loading(name, True))
        c.model_loaded.connect(self._on_loaded)
        c.model_load_failed.connect(self._on_load_failed)
        c.error_reported.connect(self.show_notice)
        c.notice_changed.connect(self.show_notice)
        c.models_changed.connect(self.refresh_models)

        s.new_chat_requested.connect(self.new_chat)
        s.conversation_selected.connect(self.open_conversation)
        self.conversations.connect()

        self.composer.send_requested.connect(self._send)
        self.composer.stop_requested.connect(c.stop)
        self.view.retry_requested.connect(c.regenerate)
        self.view.regenerate_requested.connect(c.regenerate)
        self.view.regenerate_with_requested.connect(self._regenerate_with)
        self.view.always_requested.connect(c.always_use)
        c.learning.changed.connect(self._on_auto_learned)
        self.view.edit_requested.connect(self._begin_edit)
        self.view.version_requested.connect(c.switch_version)
        self.view.top_reached.connect(c.load_earlier)
        self.view.text_copied.connect(lambda _t: self.statusBar().showMessage("Copied to the clipboard.", 2000))
        self.picker.model_chosen.connect(self._choose_model)
        self.picker.load_cancel_requested.connect(c.cancel_load)
        self.settings_button.clicked.connect(self.open_settings)
        self.models_button.clicked.connect(lambda: self.open_models())
        self.perf_button.toggled.connect(self.perf.setVisible)

    def _shortcuts(self) -> None:
        def add(keys: str | QKeySequence, slot, name: str) -> None:
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(slot)
            shortcut.setObjectName(name)

        add("Ctrl+N", self.new_chat, "newChat")
        add("Ctrl+K", self.sidebar.focus_search, "search")
        add("Ctrl+L", self.composer.focus_input, "focusComposer")
        add("Esc", self.controller.stop, "stop")
        add("Ctrl+Shift+C", self.copy_last_reply, "copyLastReply")
        add("Ctrl+M", self.open_models, "models")
        quit_action = QAction("Quit", self)
        quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        quit_action.triggered.connect(self.close)
        self.addAction(quit_action)

    # ---- actions -----------------------------------------------------------------------

    def new_chat(self) -> None:
        self._editing = None
        self.controller.new_conversation()
        self.composer.focus_input()

    def open_conversation(self, conversation_id: str) -> None:
        if conversation_id and conversation_id != self.controller.conversation_id:
            self._editing = None
            self.controller.open_conversation(conversation_id)

    def copy_last_reply(self) -> None:
        items = self.view.conversation_model().items()
        last = next((i for i in reversed(items) if i.role == "assistant"), None)
        if last is not None:
            QGuiApplication.clipboard().setText(last.content)
            self.statusBar().showMessage("Copied the last reply.", 2000)

    def open_settings(self) -> None:
        dialog = ConversationSettingsDialog(self.controller.params(), self.controller.system_prompt(), self._presets, self)
        if dialog.exec():
            params, system_prompt = dialog.result_values()
            self.controller.update_settings(params, system_prompt)

    def open_models(self, tab: str | None = None) -> ModelsPanel:
        """Show the Models panel (find, download, import, delete models), on `tab` if given."""
        fresh = self.models.panel is None
        panel = self.models.open(tab)
        if fresh:  # what Settings makes Auto forget changes the replies' "Always …"
            panel.auto_learned_changed.connect(self.controller.reload_messages)
        return panel

    @property
    def models_panel(self) -> ModelsPanel | None:
        return self.models.panel

    def show_notice(self, text: str) -> None:
        """A passing notice: it replaces the last passing one ("" clears it) and leaves kept ones."""
        self.notices.show_passing(text)

    def keep_notice(self, text: str, folder: Path | None = None) -> None:
        """A notice that stays until the person dismisses it; `folder` adds an Open folder button."""
        self.notices.keep(text, folder)

    def refresh_models(self) -> None:
        model = self.controller.model
        chat = chat_models(self.core.library.list())  # the embedder documents use is not a chat model
        self.picker.set_models(chat, model.name if model else None, remote=self.controller.remote.models(), away=self.reach.away, auto=True)
        self.picker.set_auto(self.controller.auto.on)
        self.models.set_current()

    def _on_reach(self) -> None:
        self.controller.remote.away = self.reach.away
        self.refresh_models()

    def _send(self, text: str) -> None:
        self.show_notice("")
        editing, self._editing = self._editing, None
        try:
            images = self.composer.attachments()
            ok = self.controller.edit_and_resend(editing, text, images) if editing else self.controller.send(text, images)
        except Exception as exc:  # noqa: BLE001 - the typed text stays in the composer
            self.show_notice(f"Could not send: {exc}")
            return
        if ok:
            self.composer.clear()
        elif editing:
            self._editing = editing

    def _regenerate_with(self, message_id: str, name: str) -> None:
        self.show_notice("")
        self.controller.regenerate_with(message_id, name)
        self.refresh_models()  # off Auto, that model is the one chosen now

    def _on_auto_learned(self) -> None:
        if self.models_panel is not None:
            self.models_panel.settings_page.auto_learned.refresh()

    def _learned(self) -> dict[str, str] | None:
        """The model Auto uses for each kind of task, for the replies' "Always …" (none offered
        while Cove's files are read-only: nothing could be learned)."""
        return None if self.core.read_only else preferred(self.core.settings)

    def _begin_edit(self, message_id: str) -> None:
        message = self.core.history.get_message(message_id)
        self._editing = message.id
        self.composer.set_text(message.content)
        self.composer.set_attachments([])
        store = self.core.history.images
        kept = [(n, store.path(image.sha256)) for n, image in enumerate(message.images, 1)] if store is not None else []
        self.composer.attach_files([path for _n, path in kept if path], [f"image {n}" for n, path in kept if path])
        self.composer.focus_input()
        self.statusBar().showMessage("Editing: sending makes a new version; the original is kept.", 4000)

    def _choose_model(self, name: str) -> None:
        self.controller.choose_model(name)
        self.picker.set_auto(self.controller.auto.on)
        self.models.set_current()
        self.controller.preload_model()
        model = self.controller.model
        if model is not None and ready_without_load(model, self.controller.loaded):  # on a server, or loaded already
            self.picker.set_loaded(model.name)
            if not self.view.conversation_model().items():  # a new chat: the chosen model's context
                self.composer.set_context(*context_figures({}, model, self.controller.loaded), True)

    # ---- controller events -------------------------------------------------------------

    def _on_conversation_opened(self, conversation_id: str) -> None:
        self.sidebar.select_conversation(conversation_id or None)
        self.update_title()

    def update_title(self) -> None:
        conversation = self.controller.conversation()
        title = conversation.title if conversation and conversation.title else "New chat"
        self.setWindowTitle(f"{APP_TITLE} — {title}")
        self.title_label.set_full_text(title)
        self.title_label.setToolTip(title)

    def _on_messages(self, shown: list[ShownMessage]) -> None:
        items = fold_tool_rows(shown, partial(to_item, learned=self._learned()))  # a call and its result: one row
        self.view.conversation_model().set_messages(items)
        self.update_title()
        latest = next((s.message for s in reversed(shown) if s.message.role == "assistant" and s.message.metrics), None)
        self.composer.set_context(*context_figures(latest.metrics if latest else {}, self.controller.model, self.controller.loaded), True)

    def _on_appended(self, shown: list[ShownMessage]) -> None:
        model = self.view.conversation_model()
        learned = self._learned()
        for item in shown:
            model.append_message(to_item(item, learned))
        self.update_title()

    def _on_text(self, message_id: str, text: str, n_tokens: int) -> None:
        self.view.conversation_model().append_text(message_id, text)
        self.perf.tokens_arrived(n_tokens, time.monotonic())

    def _on_finished(self, message) -> None:
        model = self.view.conversation_model()
        row = model.row_of(message.id)
        if row >= 0:
            shown = model.item(row)
            model.update_message(
                dataclasses.replace(
                    shown,
                    content=message.content,
                    status=message.status,
                    metrics=message.metrics,
                    error=message.error,
                    model_name=message.model_name,
                    reasoning=finished_reasoning(shown.reasoning, message),
                )
            )
        if message.metrics.get("context_used") is not None or "remote" in message.metrics:
            self.composer.set_context(*context_figures(message.metrics, self.controller.model, self.controller.loaded), True)
        metrics = dict(message.metrics)
        self.perf.set_turn_metrics(metrics)
        if message.status == MessageStatus.ERROR and message.error:
            self.show_notice(message.error)
        elif message.metrics.get("tool_note"):  # calls that did not run (cut off, too many rounds)
            note = str(message.metrics["tool_note"])
            self.show_notice(note[:1].upper() + note[1:] + ".")

    def _on_loaded(self, loaded) -> None:
        model = self.controller.model
        self.picker.set_loaded(model.name if model else None)
        local = installed_model(model)  # a server's model has no file size
        self.perf.set_model_info(local.size if local else None, loaded.backend, loaded.n_gpu_layers, placement=loaded.placement)
        self.perf.set_loaded(loaded)
        self.poller.set_engine_pid(self.controller.engine.host_pid)
        if loaded.template_source.startswith("fallback"):
            self.statusBar().showMessage(loaded.template_note, 8000)

    def _on_load_failed(self, sentence: str) -> None:
        self.picker.set_error(sentence)
        self.show_notice(sentence)
        self.refresh_models()

    def _on_memory(self, sample: MemorySample) -> None:
        self.perf.set_memory(sample.ui_uss, sample.engine_uss)

    # ---- state and quitting ------------------------------------------------------------

    def _restore_state(self) -> None:
        geometry = self._state.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        splitter = self._state.value("window/splitter")
        if isinstance(splitter, QByteArray):
            self.splitter.restoreState(splitter)
        perf_visible = str(self._state.value("window/perf_visible", "true")).lower() == "true"
        self.perf_button.setChecked(perf_visible)
        self.perf.setVisible(perf_visible)

    def start(self) -> None:
        """Open the last conversation shown (else the latest) with the last model."""
        self.controller.start()
        last = self._state.value("chat/conversation")
        if isinstance(last, str) and last:
            try:
                self.controller.open_conversation(last)
            except Exception:  # noqa: BLE001 - it was deleted since; the latest one is open
                pass
        self.refresh_models()
        self.conversations.refresh()
        self.update_title()
        self.welcome.start()
        self.documents.start()
        self.composer.focus_input()
        QTimer.singleShot(0, self.controller.preload_model)

    def save_state(self) -> None:
        self._state.setValue("window/geometry", self.saveGeometry())
        self._state.setValue("window/splitter", self.splitter.saveState())
        self._state.setValue("window/perf_visible", "true" if self.perf_button.isChecked() else "false")
        self._state.setValue("chat/conversation", self.controller.conversation_id or "")
        self._state.sync()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt name)
        if not self._closing:
            self._closing = True
            self.save_state()
            self.poller.stop()
            self.reach.stop()
            self.gc_pacer.stop()
            self.network_indicator.detach()
            self.models.shutdown()  # running downloads stop within ~3 s; their partial files stay resumable
            self.tools.shutdown()  # a Test's tool server, if one still runs
            self.documents.shutdown()  # indexing stops between files; the watchers stop
            if self.server is not None:
                self.server.shutdown()  # stops off the UI thread; ui/main.py waits for it once the window is gone
            self.controller.shutdown()
        event.accept()
