"""Hub search in the Models panel: the query box, the sort order, and the results with author,
downloads, likes, last update, licence and a gated mark. It only shows; the panel runs the
search (through the HubWorker) and hands the results back."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from models.hub_search import HubModel
from ui.models_panel.formatting import format_age, format_count
from ui.models_panel.list_tree import choose_row, setup_list_tree, top_items
from ui.theme import format_int

REPO_ROLE = Qt.ItemDataRole.UserRole
SORTS = (("Most downloaded", "downloads"), ("Most liked", "likes"), ("Recently updated", "recent"))
COLUMNS = ("Repository", "Author", "Downloads", "Likes", "Updated", "Licence", "Access")
TYPING_PAUSE_MS = 400  # search this long after the last keystroke


class SearchView(QWidget):
    """Emits `search_requested(query, sort)` (after a pause in typing, Enter, or the button),
    `cleared()` when the box is emptied, and `repo_chosen(repo_id)` when a result is picked."""

    search_requested = Signal(str, str)
    cleared = Signal()
    repo_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.query_box = QLineEdit(self)
        self.query_box.setPlaceholderText("Search GGUF models on Hugging Face, e.g. qwen 7b instruct")
        self.query_box.setAccessibleName("Search the Hub")
        self.query_box.setClearButtonEnabled(True)
        self.sort_box = QComboBox(self)
        self.sort_box.setAccessibleName("Sort results by")
        for text, key in SORTS:
            self.sort_box.addItem(text, key)
        self.search_button = QPushButton("Search", self)
        self.search_button.setAccessibleName("Search the Hub")
        self.status = QLabel(self)
        self.status.setAccessibleName("Search status")
        self.status.setWordWrap(True)
        self.status.hide()
        self.tree = setup_list_tree(QTreeWidget(self), "Search results", COLUMNS)
        self.tree.currentItemChanged.connect(lambda item, _previous: self._on_item(item))
        self.tree.itemActivated.connect(self._on_item)

        self._typing = QTimer(self)
        self._typing.setSingleShot(True)
        self._typing.setInterval(TYPING_PAUSE_MS)
        self._typing.timeout.connect(self.request_search)
        self.query_box.textEdited.connect(self._on_edited)
        self.query_box.returnPressed.connect(self.request_search)
        self.search_button.clicked.connect(self.request_search)
        self.sort_box.activated.connect(lambda _i: self.request_search() if self.query() else None)

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.query_box, 1)
        row.addWidget(self.sort_box)
        row.addWidget(self.search_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.tree, 1)

    # ---- commands ----------------------------------------------------------------------

    def query(self) -> str:
        return self.query_box.text().strip()

    def sort(self) -> str:
        return str(self.sort_box.currentData())

    def set_sort(self, key: str) -> None:
        index = self.sort_box.findData(key)
        if index >= 0:
            self.sort_box.setCurrentIndex(index)

    def request_search(self) -> None:
        self._typing.stop()
        if self.query():
            self.search_requested.emit(self.query(), self.sort())
        else:
            self.cleared.emit()

    def set_network_allowed(self, allowed: bool) -> None:
        self.search_button.setEnabled(allowed)
        self.search_button.setToolTip("" if allowed else "Cove is offline; turn offline mode off in Settings to search")

    def set_searching(self, query: str) -> None:
        self._say(f"Searching the Hub for “{query}”…")

    def set_results(self, query: str, models: Sequence[HubModel]) -> None:
        self.tree.clear()
        for m in models:
            item = QTreeWidgetItem(
                [
                    m.repo_id,
                    m.author or "–",
                    format_count(m.downloads),
                    format_count(m.likes),
                    format_age(m.last_modified),
                    m.license or "–",
                    "Gated" if m.gated else "Open",
                ]
            )
            item.setData(0, REPO_ROLE, m.repo_id)
            item.setToolTip(2, f"{format_int(m.downloads)} downloads in the last 30 days")
            item.setToolTip(3, f"{format_int(m.likes)} likes")
            if m.gated:
                item.setToolTip(6, "Gated: accept the licence on the model's Hub page and save a token in Settings")
            item.setData(
                0,
                Qt.ItemDataRole.AccessibleTextRole,
                f"{m.repo_id} by {m.author or 'unknown'}, {format_count(m.downloads)} downloads, "
                f"{format_count(m.likes)} likes{', gated' if m.gated else ''}",
            )
            self.tree.addTopLevelItem(item)
        for column in range(1, len(COLUMNS)):
            self.tree.resizeColumnToContents(column)
        self._say(f"{len(models)} GGUF repositories match “{query}”." if models else f"No GGUF repositories match “{query}”.")

    def show_error(self, sentence: str) -> None:
        self._say(sentence)

    def clear_results(self) -> None:
        self.tree.clear()
        self._say("")

    def status_text(self) -> str:
        return self.status.text() if not self.status.isHidden() else ""

    def rows(self) -> list[tuple[str, ...]]:
        """Every result row's cells, as shown."""
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in top_items(self.tree)]

    def choose(self, row: int) -> None:
        choose_row(self.tree, row, self._on_item)

    # ---- internals ---------------------------------------------------------------------

    def _on_edited(self, text: str) -> None:
        if text.strip():
            self._typing.start()
        else:
            self._typing.stop()
            self.cleared.emit()

    def _on_item(self, item: QTreeWidgetItem | None) -> None:
        repo = item.data(0, REPO_ROLE) if item is not None else None
        if isinstance(repo, str):
            self.repo_chosen.emit(repo)

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))
