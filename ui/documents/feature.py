"""What the main window needs for documents: the Documents entry at the foot of the sidebar (the
page in a window of its own, built the first time it is opened), the chip above the composer (the
open conversation's collections: a menu of check boxes), the documents of each turn (provided
to the ChatController), the sources under replies, the one IndexWorker with its watchers,
which keep the collections up to date while the window is open, and the embedders it and the turns
use (ui/documents/embedders.py: each collection on its own model, app/docs/embedder_choice.py).
Indexing waits while a reply streams."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QDialog, QMenu, QToolButton, QVBoxLayout, QWidget

from app.docs.embedding import Embedder
from app.docs.for_turn import turn_documents
from app.docs.index_db import CollectionInfo, DocumentIndex, DocumentIndexError
from app.docs.patterns import Patterns
from app.docs.turn_sources import TurnDocuments
from app.store.sources import attach_collections, attached_collections
from models.library import InstalledModel
from ui.documents import dialogs
from ui.documents.embedder_chooser import EmbedderChoosing
from ui.documents.embedder_offer import EmbedderOffer
from ui.documents.embedders import WindowEmbedders
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
        self.embedders = WindowEmbedders(self._core.paths.documents_database)
        self.worker = worker or IndexWorker(
            self._core.paths.documents_database, embedder=self._index_embedder, hold=self._streaming.is_set, parent=self
        )
        self._reader: DocumentIndex | None = None
        self.panel: DocumentsPanel | None = None
        self.offer: EmbedderOffer | None = None
        self.choosing: EmbedderChoosing | None = None  # the page's row and offer of embedding models
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

    def infos(self) -> list[CollectionInfo]:
        """Every collection as the index has it (UI thread)."""
        reader = self.reader()
        if reader is None:
            return []
        return [info for info in map(reader.collection, reader.names()) if info is not None]

    def _watch(self) -> None:
        if self.reader() is not None and not self._closed:
            infos = self.infos()
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
        reader = self.reader()
        infos = [info for info in map(reader.collection, names) if info is not None] if reader is not None else []
        embedder, note = self.embedders.for_search(infos)  # its host starts on the first question, on the turn's thread
        if note:
            self._notice(note[:1].upper() + note[1:] + ".")
        return turn_documents(
            self._core.paths.documents_database,
            names,
            context_length=model.context_length if isinstance(model, InstalledModel) else None,
            params=self._controller.params(),
            embedder=lambda: embedder,
        )

    def _resolve_embedder(self) -> None:
        """Read the installed embedding models and the choice again (the library is read here, on
        the UI thread); embedders no longer needed are closed."""
        try:
            self.embedders.refresh(self._core.library, self._core.settings, {i.embedding_model for i in self.infos() if i.embedding_model})
        except Exception:  # noqa: BLE001 - the library could not be read: the embedders stay as they were
            pass

    def _index_embedder(self, name: str) -> Embedder | None:
        """The embedder for collection `name`'s run (called on the worker's thread)."""
        return self.embedders.for_indexing(name)

    def move(self, names: list[str], model: str) -> None:
        """Embed these collections again with `model` (their old vectors dropped; keywords meanwhile)."""
        for name in names:
            self.embedders.move(name, model)
            self.worker.reindex(name)

    # ---- the page ----------------------------------------------------------------------------

    def open(self) -> DocumentsPanel:
        """Show the Documents page (built on first use)."""
        self._resolve_embedder()
        if self.panel is None:
            page = DocumentsPage(self.worker, confirm=self._confirm)
            page.collections_changed.connect(self._collections_changed)
            self.offer = EmbedderOffer(self._core, lambda: self.embedders.chosen is not None, self._embedder_ready, page)
            page.add_banner(self.offer)
            confirm = self._confirm or (lambda title, question: dialogs.ask_yes_no(page, title, question))
            self.choosing = EmbedderChoosing(
                self._core,
                self.embedders,
                refreshed=self._resolve_embedder,
                collections=self.infos,
                confirm=confirm,
                move=self.move,
                say=lambda text, error: page.say(text, error=error),
                parent=page,
            )
            page.add_banner(self.choosing.banner)  # each banner goes above the one before: the row first, then the offer
            page.add_banner(self.choosing.row)
            self.panel = DocumentsPanel(page, self._window)
        if self.choosing is not None:
            self.choosing.refresh()
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
        if self.choosing is not None:
            self.choosing.refresh()
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
        self.embedders.close()
