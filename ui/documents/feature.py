"""What the main window needs for documents: the Documents entry at the foot of the sidebar (the
page in a window of its own, built the first time it is opened), the chip above the composer (the
open conversation's collections: a menu of check boxes), the documents of each turn (provided
to the ChatController), the sources under replies, and the one IndexWorker with its watchers,
which keep the collections up to date while the window is open. Indexing waits while a reply
streams."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QDialog, QMenu, QToolButton, QVBoxLayout, QWidget

from app.docs.embedding import QUERY_NICE, Embedder, EngineEmbedder, embedding_model
from app.docs.for_turn import turn_documents
from app.docs.index_db import DocumentIndex, DocumentIndexError
from app.docs.patterns import Patterns
from app.docs.turn_sources import TurnDocuments
from app.store.sources import attach_collections, attached_collections
from models.library import InstalledModel
from ui.documents.embedder_offer import EmbedderOffer
from ui.documents.page import Confirm, DocumentsPage
from ui.documents.sources import ReplySources
from ui.documents.worker import IndexWorker

if TYPE_CHECKING:
    from ui.chat.controller import ChatController
    from ui.conversation.view import ConversationView

START_DELAY_MS = 3000  # after start-up: the collections are brought up to date (what changed while Cove was closed)


class DocumentsPanel(QDialog):
    def __init__(self, page: DocumentsPage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = page
        self.setWindowTitle("Documents")
        self.setAccessibleName("Documents")
        self.setObjectName("documentsPanel")
        layout = QVBoxLayout(self)
        layout.addWidget(page)
        self.resize(960, 620)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        self.page.refresh()


class DocumentsFeature(QObject):
    """`button` goes in the sidebar, `chip` above the composer; `attach(controller, view)` wires
    the turns and the sources; `start()` after the window shows; `shutdown()` on quit."""

    def __init__(
        self, window: QWidget, controller: ChatController, *, worker: IndexWorker | None = None, confirm: Confirm | None = None, notice=None
    ) -> None:
        super().__init__(window)
        self._window, self._controller, self._core = window, controller, controller.core
        self._notice = notice or (lambda text: None)
        self._confirm = confirm
        self._streaming = threading.Event()  # set while a reply streams: indexing steps aside
        self._embedder: EngineEmbedder | None = None  # indexing: a niced host
        self._query_embedder: EngineEmbedder | None = None  # a turn's question: a host at normal priority
        self._embedder_path: str | None = None
        self.worker = worker or IndexWorker(
            self._core.paths.documents_database, embedder=self._index_embedder, hold=self._streaming.is_set, parent=self
        )
        self._reader: DocumentIndex | None = None
        self.panel: DocumentsPanel | None = None
        self.offer: EmbedderOffer | None = None
        self.sources: ReplySources | None = None
        self._closed = False

        self.button = QToolButton(window)
        self.button.setObjectName("documentsButton")
        self.button.setText("Documents")
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.button.setAccessibleName("Documents")
        self.button.setToolTip("Your document collections: add folders, see indexing, remove")
        self.button.clicked.connect(lambda: self.open())

        self.chip = QToolButton(window)
        self.chip.setObjectName("documentsChip")
        self.chip.setAccessibleName("Documents for this conversation")
        self.chip.setToolTip("Which of your document collections this conversation answers from")
        self.chip.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.chip.setAutoRaise(True)
        self.menu = QMenu(self.chip)
        self.menu.aboutToShow.connect(self.fill_menu)
        self.chip.setMenu(self.menu)
        self.worker.job_finished.connect(lambda *_: self._collections_changed())

    # ---- wiring ------------------------------------------------------------------------------

    def attach(self, view: ConversationView) -> None:
        """The turns get their documents, replies their sources; the chip follows the conversation."""
        c = self._controller
        c.provide_documents(self.documents_for_turn)
        c.busy_changed.connect(lambda busy: self._streaming.set() if busy else self._streaming.clear())
        c.conversation_opened.connect(lambda _id: self.show_chip())
        self.sources = ReplySources(view, lambda: self._core.db, notice=self._notice)
        c.messages_reloaded.connect(lambda _shown: self._show_sources(None))
        c.reply_finished.connect(lambda message: self._show_sources([message.id]))
        self.show_chip()

    def _show_sources(self, message_ids: list[str] | None) -> None:
        """Put their sources on these replies' rows (all shown replies when None)."""
        if self.sources is not None:
            self.sources.show_sources(message_ids)

    def start(self) -> None:
        """Once the window shows: watch the collections and bring them up to date (no file is made
        for a person who has none)."""
        if self.reader() is not None:
            QTimer.singleShot(START_DELAY_MS, self._catch_up)

    def _catch_up(self) -> None:
        reader = self.reader()
        if reader is None or self._closed:
            return
        self._resolve_embedder()
        for name in reader.names():
            self.worker.reindex(name)
        self._watch()

    # ---- the index, read on the UI thread ------------------------------------------------------

    def reader(self) -> DocumentIndex | None:
        if self._reader is None and self._core.paths.documents_database.exists():
            try:
                self._reader = DocumentIndex(self._core.paths.documents_database)
            except DocumentIndexError as exc:
                self._notice(str(exc))
        return self._reader

    def names(self) -> list[str]:
        reader = self.reader()
        return reader.names() if reader is not None else []

    def _watch(self) -> None:
        reader = self.reader()
        if reader is not None and not self._closed:
            infos = [info for info in map(reader.collection, reader.names()) if info is not None]
            self.worker.watch(
                {info.name: info.roots for info in infos}, {info.name: Patterns.stored(info.include, info.exclude) for info in infos}
            )

    def _collections_changed(self) -> None:
        self._watch()
        self.show_chip()

    # ---- the chip --------------------------------------------------------------------------

    def attached(self) -> list[str]:
        conversation_id = self._controller.conversation_id
        return attached_collections(self._core.db, conversation_id) if conversation_id else []

    def show_chip(self) -> None:
        """The chip names the open conversation's collections (those still in the index); it is
        hidden while there are no collections at all."""
        existing = self.names()
        names = [n for n in self.attached() if n in existing]
        self.chip.setText(f"Documents: {', '.join(names)}" if names else "Documents: none")
        self.chip.setVisible(bool(existing))

    def fill_menu(self) -> None:
        """Every collection, a check box for the open conversation; then the Documents page."""
        self.menu.clear()
        on = set(self.attached())
        names = self.names()
        if not names:
            empty = self.menu.addAction("No collections yet")
            empty.setEnabled(False)
        for name in names:
            action = self.menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(name in on)
            action.toggled.connect(lambda checked, n=name: self.use(n, checked))
        self.menu.addSeparator()
        self.menu.addAction("Documents…", lambda: self.open())

    def use(self, name: str, on: bool) -> None:
        """Attach a collection to the open conversation, or detach it (a new chat is written now)."""
        c = self._controller
        if c.conversation_id is None:
            model = c.model.name if c.model else None
            c.conversation_id = self._core.history.create_conversation(model=model).id
            c.conversation_opened.emit(c.conversation_id)
            c.conversations_changed.emit()
        names = [n for n in self.attached() if n != name] + ([name] if on else [])
        attach_collections(self._core.db, c.conversation_id, names)
        self.show_chip()

    # ---- a turn's documents ----------------------------------------------------------------------

    def documents_for_turn(self, conversation_id: str) -> TurnDocuments | None:
        """The documents of a turn of this conversation (read now, on the UI thread), or None."""
        wanted = attached_collections(self._core.db, conversation_id)
        if not wanted:
            return None
        known = set(self.names())
        gone = [n for n in wanted if n not in known]
        if gone:
            self._notice(f"The collection {', '.join(gone)} no longer exists; this reply is not given its passages.")
        names = [n for n in wanted if n in known]
        if not names:
            return None
        model = self._controller.model
        self._resolve_embedder()
        return turn_documents(
            self._core.paths.documents_database,
            names,
            context_length=model.context_length if isinstance(model, InstalledModel) else None,
            params=self._controller.params(),
            embedder=self._search_embedder,
        )

    def _resolve_embedder(self) -> None:
        """The installed embedding model, if any (the library is read here, on the UI thread)."""
        try:
            model = embedding_model(self._core.library, self._core.settings)
        except Exception:  # noqa: BLE001 - no embeddings: keywords only
            model = None
        if model is None or model.path != self._embedder_path:
            old = (self._embedder, self._query_embedder)
            self._embedder = EngineEmbedder(model) if model is not None else None
            self._query_embedder = EngineEmbedder(model, nice=QUERY_NICE) if model is not None else None
            self._embedder_path = model.path if model is not None else None
            for embedder in old:
                if embedder is not None:
                    threading.Thread(target=embedder.close, name="cove-embedder-close", daemon=True).start()

    def _index_embedder(self) -> Embedder | None:
        return self._embedder  # read on the worker's thread; made on the UI thread

    def _search_embedder(self) -> Embedder | None:
        return self._query_embedder  # read on the turn's thread; its host starts on the first question

    # ---- the page ----------------------------------------------------------------------------

    def open(self) -> DocumentsPanel:
        """Show the Documents page (built on first use)."""
        if self.panel is None:
            self._resolve_embedder()
            page = DocumentsPage(self.worker, confirm=self._confirm)
            page.collections_changed.connect(self._collections_changed)
            self.offer = EmbedderOffer(self._core, lambda: self._embedder is not None, self._embedder_ready, page)
            page.add_banner(self.offer)
            self.panel = DocumentsPanel(page, self._window)
        self.panel.show()
        self.panel.raise_()
        self.panel.activateWindow()
        return self.panel

    def _embedder_ready(self) -> None:
        """The default embedder was just installed: every collection is indexed again, so its
        passages get vectors (searchable by keywords meanwhile)."""
        self._resolve_embedder()
        reader = self.reader()
        for name in reader.names() if reader is not None else ():
            self.worker.reindex(name)
        if self.offer is not None:
            self.offer.refresh()
        self._notice("The embedder is ready: your collections are being embedded, and are searched by keywords meanwhile.")

    def shutdown(self) -> None:
        """Stop indexing (between files), the watchers and the embedding model's engine."""
        self._closed = True
        if self.panel is not None:
            self.panel.close()
            self.panel.page.close_index()
        self.worker.shutdown()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        embedders, self._embedder, self._query_embedder = (self._embedder, self._query_embedder), None, None
        for embedder in embedders:
            if embedder is not None:
                embedder.close()
