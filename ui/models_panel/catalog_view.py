"""The curated catalog in the Models panel: a dozen well-known instruct models, each with its
size, recommended quant, licence, and a mark saying whether it suits this machine."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from models.catalog import CatalogEntry
from ui.models_panel.formatting import FIT_HINTS, FIT_WORDS, verdict_color
from ui.models_panel.list_tree import choose_row, setup_list_tree, top_items
from ui.theme import format_bytes

ENTRY_ROLE = Qt.ItemDataRole.UserRole
COLUMNS = ("Model", "Size", "Quant", "This machine", "Licence")
FIT_COLUMN = 3
VISION_MARK = " · vision"  # after a model that reads images (it comes with a vision projector)


class CatalogView(QWidget):
    """Emits `entry_chosen(CatalogEntry)` when the person picks a catalog model."""

    entry_chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._entries: list[CatalogEntry] = []
        self._fits: list[str] = []
        self.caption = QLabel("Recommended models. The mark says how each suits this machine's memory at a 4,096-token context.", self)
        self.caption.setWordWrap(True)
        self.caption.setAccessibleName("About the recommended models")
        self.tree = setup_list_tree(QTreeWidget(self), "Recommended models", COLUMNS)
        self.tree.currentItemChanged.connect(lambda item, _previous: self._on_item(item))
        self.tree.itemActivated.connect(self._on_item)  # Enter or double-click: again, e.g. after an error
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.tree, 1)

    def set_entries(self, entries: Sequence[CatalogEntry], fits: Sequence[str]) -> None:
        """`fits[i]` is machine_fit() of `entries[i]`: "fits", "tight" or "too large"."""
        self._entries, self._fits = list(entries), list(fits)
        self.tree.clear()
        for entry, fit in zip(self._entries, self._fits):
            item = QTreeWidgetItem(
                [
                    entry.name + (VISION_MARK if entry.vision else ""),
                    f"≈{format_bytes(entry.size_bytes + entry.mmproj_size_bytes)}",
                    entry.quant,
                    FIT_WORDS.get(fit, fit),
                    entry.license,
                ]
            )
            item.setData(0, ENTRY_ROLE, entry)
            files = f"{entry.filename} + {entry.mmproj}" if entry.mmproj else entry.filename
            item.setToolTip(0, f"{entry.description}\n{entry.repo_id} · {files}" + (f"\n{entry.notes}" if entry.notes else ""))
            item.setToolTip(FIT_COLUMN, FIT_HINTS.get(fit, ""))
            item.setData(
                0,
                Qt.ItemDataRole.AccessibleTextRole,
                f"{entry.name}, {format_bytes(entry.size_bytes)}, {entry.quant}, {FIT_WORDS.get(fit, fit)} on this machine"
                + (", reads images" if entry.vision else ""),
            )
            self.tree.addTopLevelItem(item)
        self._paint_marks()
        for column in range(1, len(COLUMNS)):
            self.tree.resizeColumnToContents(column)

    def show_error(self, sentence: str) -> None:
        self.caption.setText(sentence)

    def rows(self) -> list[tuple[str, str]]:
        """(model name, fit word) per row, as shown."""
        return [(item.text(0), item.text(FIT_COLUMN)) for item in top_items(self.tree)]

    def choose(self, row: int) -> None:
        """Pick the catalog model on `row` as a click would."""
        choose_row(self.tree, row, self._on_item)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange:
            self._paint_marks()
        super().changeEvent(event)

    def _paint_marks(self) -> None:
        palette = self.palette()
        for i, fit in enumerate(self._fits):
            item = self.tree.topLevelItem(i)
            if item is not None:
                item.setForeground(FIT_COLUMN, verdict_color(fit, palette))

    def _on_item(self, item: QTreeWidgetItem | None) -> None:
        entry = item.data(0, ENTRY_ROLE) if item is not None else None
        if isinstance(entry, CatalogEntry):
            self.entry_chosen.emit(entry)
