"""The Documents page: the person's collections (named sets of folders and files), a new one from a
folder, folders or files added by dialog or by dropping them on the page, which of their files are
indexed (Patterns…: include and exclude patterns, the defaults shown), each collection's indexing
(progress, page of a PDF, time left, the files left out unread and why, the files with a problem and
their sentence), Pause / Resume, Reindex and Remove (which asks first, and says the files
themselves are not touched).

Threads: every write to the index goes to the IndexWorker's thread. The page reads names and
status here, on the UI thread, with a connection of its own opened only once the index file
exists (quick reads; SQLite's WAL lets them go on beside the worker's writes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.docs.index_db import DocumentIndex, DocumentIndexError, UnknownCollection
from app.docs.patterns import DEFAULT_EXCLUDES, BadPattern, LeftOutCount, Patterns, person_patterns
from app.docs.readers import SUFFIXES
from app.docs.types import Progress
from ui.documents import dialogs
from ui.documents.progress_view import ProgressView
from ui.documents.worker import REMOVE, IndexWorker
from ui.theme import show_sentence

NAME_ROLE = Qt.ItemDataRole.UserRole
HINT = (
    "Drop folders or files here to make a collection of them, or onto a collection to add them to it. "
    "Cove reads text, Markdown, HTML, PDF (with a text layer), Word (.docx) and source code. Nothing leaves "
    "this computer, and your files are only read, never changed, moved or copied."
)
Confirm = Callable[[str, str], bool]  # (title, question) -> yes?
AskPatterns = Callable[[str, Patterns], "Patterns | None"]  # (collection, its patterns) -> the new ones, or None


def patterns_line(patterns: Patterns) -> str:
    """'Indexes every file Cove reads, leaving out the default excludes and 2 more patterns.'"""
    which = "files matching " + ", ".join(patterns.include) if patterns.include else "every file Cove reads"
    own = [p for p in patterns.exclude if p not in DEFAULT_EXCLUDES]
    if patterns.default_excludes:
        left = "the default excludes" + (f" and {', '.join(own)}" if own else "")
    else:
        left = ", ".join(patterns.exclude) if patterns.exclude else "nothing"
    return f"Indexes {which}, leaving out {left}."


class DocumentsPage(QWidget):
    """Emits `collections_changed()` once a collection was made, added to or removed."""

    collections_changed = Signal()

    def __init__(
        self,
        worker: IndexWorker,
        *,
        confirm: Confirm | None = None,
        choose_folder: Callable[[], Path | None] | None = None,
        choose_files: Callable[[], list[Path]] | None = None,
        ask_name: Callable[[str], str | None] | None = None,
        ask_patterns: AskPatterns | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.worker = worker
        self._confirm = confirm or (lambda title, question: dialogs.ask_yes_no(self, title, question))
        self._choose_folder = choose_folder or (lambda: dialogs.choose_folder(self))
        self._choose_files = choose_files or (lambda: dialogs.choose_files(self))
        self._ask_name = ask_name or (lambda default: dialogs.ask_name(self, default))
        self._ask_patterns = ask_patterns or (lambda name, current: dialogs.ask_patterns(self, name, current))
        self._index: DocumentIndex | None = None
        self.setObjectName("documentsPage")
        self.setAcceptDrops(True)

        self.collections = QListWidget(self)
        self.collections.setObjectName("documentsCollections")
        self.collections.setAccessibleName("Collections")
        self.new_button = QPushButton("New collection…", self)
        self.new_button.setToolTip("Make a collection of a folder")
        left = QWidget(self)
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.collections, 1)
        column.addWidget(self.new_button)

        self.title = QLabel(self)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.roots = QLabel(self)
        self.roots.setObjectName("documentsRoots")
        self.roots.setWordWrap(True)
        self.roots.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.patterns = QLabel(self)
        self.patterns.setObjectName("documentsPatternsLine")
        self.patterns.setWordWrap(True)
        self.add_folder_button = QPushButton("Add folder…", self)
        self.add_files_button = QPushButton("Add files…", self)
        self.patterns_button = QPushButton("Patterns…", self)
        self.patterns_button.setToolTip("Which files of the collection are indexed: include and exclude patterns")
        self.pause_button = QPushButton("Pause", self)
        self.reindex_button = QPushButton("Reindex", self)
        self.reindex_button.setToolTip("Read new and changed files again and drop deleted ones")
        self.remove_button = QPushButton("Remove…", self)
        buttons = QHBoxLayout()
        for button in (self.add_folder_button, self.add_files_button, self.patterns_button, self.pause_button, self.reindex_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)
        self.progress = ProgressView(self)
        self.error = QLabel(self)
        self.error.setObjectName("documentsError")
        self.error.setWordWrap(True)
        self.hint = QLabel(HINT, self)
        self.hint.setWordWrap(True)
        right = QWidget(self)
        self.details = right
        detail = QVBoxLayout(right)
        detail.addWidget(self.title)
        detail.addWidget(self.roots)
        detail.addWidget(self.patterns)
        detail.addLayout(buttons)
        detail.addWidget(self.progress, 1)

        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(left)
        self.empty = QLabel("No collections yet.\n\nDrop a folder of documents here, or choose New collection…", self)
        self.empty.setObjectName("documentsEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.right = QStackedWidget(self)  # the collection shown, or what to do when there is none
        self.right.addWidget(right)
        self.right.addWidget(self.empty)
        splitter.addWidget(self.right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([220, 560])
        layout = QVBoxLayout(self)
        layout.addWidget(self.hint)
        layout.addWidget(self.error)
        layout.addWidget(splitter, 1)
        show_sentence(self.error, "", False, self)

        self.collections.currentItemChanged.connect(lambda *_: self.show_selected())
        self.new_button.clicked.connect(self.new_collection)
        self.add_folder_button.clicked.connect(self.add_folder)
        self.add_files_button.clicked.connect(self.add_files)
        self.patterns_button.clicked.connect(self.edit_patterns)
        self.pause_button.clicked.connect(self.toggle_pause)
        self.reindex_button.clicked.connect(lambda: self.reindex_selected())
        self.remove_button.clicked.connect(self.remove_selected)
        worker.progress_changed.connect(self._on_progress)
        worker.job_finished.connect(self._on_job_finished)
        worker.job_failed.connect(self._on_job_failed)
        worker.watch_failed.connect(lambda _name, sentence: self.say(sentence, error=True))
        self.refresh()

    def add_banner(self, widget: QWidget) -> None:
        """A line of the feature's above the collections (the embedder's offer)."""
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.insertWidget(1, widget)

    # ---- reading the index (UI thread, quick) ------------------------------------------------

    def index(self) -> DocumentIndex | None:
        """The page's own connection, once the index file exists."""
        if self._index is None and self.worker.index_path.exists():
            try:
                self._index = DocumentIndex(self.worker.index_path)
            except DocumentIndexError as exc:
                self.say(str(exc), error=True)
        return self._index

    def names(self) -> list[str]:
        index = self.index()
        return index.names() if index is not None else []

    def refresh(self) -> None:
        """List the collections again (keeping the selection) and show the selected one."""
        keep = self.selected()
        names = self.names()
        self.collections.blockSignals(True)
        self.collections.clear()
        for name in names:
            item = QListWidgetItem(self._item_text(name))
            item.setData(NAME_ROLE, name)
            self.collections.addItem(item)
            if name == keep:
                self.collections.setCurrentItem(item)
        if self.collections.currentItem() is None and self.collections.count():
            self.collections.setCurrentRow(0)
        self.collections.blockSignals(False)
        self.show_selected()

    def _item_text(self, name: str, progress: Progress | None = None) -> str:
        """The collection's name and, under it, its state in a few words."""
        if progress is not None and not (progress.finished or progress.paused):
            state = f"indexing {progress.files_done} of {progress.files_total}"
        elif self.worker.is_paused(name):
            state = "paused"
        else:
            index = self.index()
            try:
                status = index.status(name) if index is not None else None
            except UnknownCollection:
                status = None
            if status is None:
                return name
            left = LeftOutCount.of(status.left_out).files
            state = f"{status.files_indexed} files" + (f" · {len(status.problems)} with a note" if status.problems else "")
            state += f" · {left} left out" if left else ""
        return f"{name}\n{state}"

    def selected(self) -> str | None:
        item = self.collections.currentItem()
        return item.data(NAME_ROLE) if item is not None else None

    def select(self, name: str) -> None:
        for row in range(self.collections.count()):
            if self.collections.item(row).data(NAME_ROLE) == name:
                self.collections.setCurrentRow(row)
                return

    def show_selected(self) -> None:
        name = self.selected()
        self.right.setCurrentWidget(self.details if name is not None else self.empty)
        if name is None:
            self.progress.clear()
            return
        index = self.index()
        try:
            status = index.status(name) if index is not None else None
        except UnknownCollection:
            status = None
        self.title.setText(name)
        self.roots.setText("\n".join(status.roots) if status is not None else "")
        self.patterns.setText(patterns_line(self.patterns_of(name)))
        paused, busy = self.worker.is_paused(name), self.worker.is_busy(name)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_button.setEnabled(paused or busy)
        latest = self.worker.latest.get(name)
        if busy and latest is not None:
            self.progress.show_progress(latest)
        elif status is not None:
            self.progress.show_status(status, paused=paused)

    # ---- commands -------------------------------------------------------------------------

    def new_collection(self) -> None:
        """Ask for a folder, then a name (the folder's by default); make it and index it."""
        folder = self._choose_folder()
        if folder is None:
            return
        name = self._ask_name(self._free_name(Path(folder).name or "Documents"))
        if name:
            self.make_collection(name, [Path(folder)])

    def make_collection(self, name: str, roots: Sequence[Path]) -> None:
        self.say("")
        self.worker.create(name.strip(), roots)
        self.pending_select = name.strip()

    def add_folder(self) -> None:
        name = self.selected()
        folder = self._choose_folder() if name else None
        if name and folder is not None:
            self.worker.add_roots(name, [Path(folder)])
            self.show_selected()

    def add_files(self) -> None:
        name = self.selected()
        files = self._choose_files() if name else []
        if name and files:
            self.worker.add_roots(name, files)
            self.show_selected()

    def add_paths(self, paths: Sequence[Path], collection: str | None) -> None:
        """What a drop does: add `paths` to `collection`, or make a new collection of them, named
        after the first."""
        paths = [Path(p) for p in paths]
        if not paths:
            return
        if collection is not None:
            self.worker.add_roots(collection, paths)
            self.show_selected()
            return
        self.make_collection(self._free_name(paths[0].name or "Documents"), paths)

    def patterns_of(self, name: str) -> Patterns:
        """The collection's patterns as stored (the defaults until it is in the index)."""
        index = self.index()
        info = index.collection(name) if index is not None else None
        return Patterns.stored(info.include, info.exclude) if info is not None else Patterns()

    def edit_patterns(self) -> None:
        """Ask for the selected collection's patterns (the Patterns… button), then use them."""
        name = self.selected()
        if name is None:
            return
        patterns = self._ask_patterns(name, self.patterns_of(name))
        if patterns is not None:
            self.set_patterns(name, patterns.include, patterns.exclude)

    def set_patterns(self, name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
        """Give `name` these include patterns and exactly these exclude patterns, then index it; a
        bad pattern gets its sentence and the collection is left as it was. False: it was bad."""
        try:
            patterns = person_patterns(include, exclude, default_excludes=False, supported=SUFFIXES)
        except BadPattern as exc:
            self.say(str(exc), error=True)
            return False
        self.say("")
        self.worker.set_patterns(name, patterns)
        self.patterns.setText(patterns_line(patterns))
        return True

    def toggle_pause(self) -> None:
        name = self.selected()
        if name is None:
            return
        if self.worker.is_paused(name):
            self.worker.resume(name)
        else:
            self.worker.pause(name)
        self.refresh()

    def reindex_selected(self) -> None:
        """Bring the selected collection up to date (the Reindex button)."""
        name = self.selected()
        if name:
            self.worker.reindex(name)

    def remove_selected(self) -> None:
        name = self.selected()
        if name is None:
            return
        question = (
            f"Remove the collection {name}? Its passages are deleted from Cove's document index. "
            "The files themselves are not touched: nothing on your disk is changed, moved or deleted."
        )
        if self._confirm("Remove collection?", question):
            self.worker.remove(name)
            self.say(f"Removing {name}…")

    def say(self, text: str, *, error: bool = False) -> None:
        text = text.strip()
        if text and error:
            text = (text[:1].upper() + text[1:]).rstrip(".") + "."
        show_sentence(self.error, text, error, self)

    def close_index(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # ---- what the worker reported -----------------------------------------------------------

    pending_select: str | None = None

    def _on_progress(self, progress: Progress) -> None:
        if progress.collection not in self.names_shown():
            self.refresh()  # a collection just made: listed at its first progress
            if self.pending_select == progress.collection:
                self.select(progress.collection)
        for row in range(self.collections.count()):
            item = self.collections.item(row)
            if item.data(NAME_ROLE) == progress.collection:
                item.setText(self._item_text(progress.collection, progress))
        if progress.collection == self.selected():
            self.progress.show_progress(progress)
            self.pause_button.setEnabled(True)

    def _on_job_finished(self, kind: str, name: str, _final: object) -> None:
        if kind == REMOVE:
            self.say(f"Removed {name}. Your files were not touched.")
        self.refresh()
        if self.pending_select == name and kind != REMOVE:
            self.select(name)
            self.pending_select = None
        self.collections_changed.emit()

    def _on_job_failed(self, _kind: str, name: str, sentence: str) -> None:
        self.say(sentence, error=True)
        self.refresh()

    def names_shown(self) -> list[str]:
        return [self.collections.item(row).data(NAME_ROLE) for row in range(self.collections.count())]

    def _free_name(self, base: str) -> str:
        taken = set(self.names())
        name, n = base, 2
        while name in taken:
            name, n = f"{base} {n}", n + 1
        return name

    # ---- drag and drop -------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt name)
        if _local_paths(event):
            event.acceptProposedAction()

    def dragMoveEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if _local_paths(event):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt name)
        paths = _local_paths(event)
        if not paths:
            return
        event.acceptProposedAction()
        self.add_paths(paths, self._drop_target(event.position().toPoint()))

    def _drop_target(self, pos: QPoint) -> str | None:
        """The collection under the drop: a row of the list, or the details of the one shown."""
        viewport = self.collections.viewport()
        item = self.collections.itemAt(viewport.mapFrom(self, pos))
        if item is not None:
            return item.data(NAME_ROLE)
        holder = self.right.parentWidget()
        if self.details.isVisible() and holder is not None and self.right.geometry().contains(holder.mapFrom(self, pos)):
            return self.selected()
        return None


def _local_paths(event: QDropEvent | QDragEnterEvent) -> list[Path]:
    mime = event.mimeData()
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
