"""Installed models in the Models panel: name, quant, size, architecture (marked "· vision" for a
model with a projector), context length, source and last use; Use / Import… / Delete… buttons; dropping .gguf files imports them; and
the loaded model's estimated memory beside what its engine was measured to hold."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from models.library import InstalledModel
from ui.models_panel.formatting import estimate_figures, format_age
from ui.models_panel.list_tree import setup_list_tree, top_items
from ui.theme import blank_icon, dot_icon, format_bytes, format_int

NAME_ROLE = Qt.ItemDataRole.UserRole
COLUMNS = ("Name", "Quant", "Size", "Architecture", "Context", "Source", "Last used")
VISION_MARK = " · vision"  # after the architecture of a model that has a projector: it reads images
SOURCE_WORDS = {"imported": "Imported", "copied": "Imported (copy)", "starter": "Starter", "download": "Downloaded"}


def source_text(model: InstalledModel) -> str:
    """'org/repo · file.gguf' for a download, else the path it was imported from."""
    if model.repo:
        return f"{model.repo} · {model.file}" if model.file else model.repo
    return f"{SOURCE_WORDS.get(model.source, model.source)}: {model.path}"


def gguf_paths(urls: Sequence[object]) -> list[str]:
    """Local .gguf files among dropped URLs."""
    paths = []
    for url in urls:
        local = url.toLocalFile() if hasattr(url, "toLocalFile") else str(url)
        if local and local.lower().endswith(".gguf"):
            paths.append(local)
    return paths


class _DropTree(QTreeWidget):
    """The table, accepting .gguf files dropped from a file manager."""

    files_dropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DropOnly)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        if gguf_paths(event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802, ANN001 (Qt override)
        if gguf_paths(event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        paths = gguf_paths(event.mimeData().urls())
        if paths:
            event.acceptProposedAction()
            self.files_dropped.emit(paths)
        else:
            event.ignore()


class InstalledView(QWidget):
    """Emits `use_requested(name)`, `import_requested(list[str])` and `delete_requested(name)`."""

    use_requested = Signal(str)
    import_requested = Signal(list)
    delete_requested = Signal(str)
    placement_requested = Signal(str)  # model name: the person wants to set where it runs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._models: list[InstalledModel] = []
        self._current: str | None = None
        self._loaded: str | None = None
        self.caption = QLabel("Models on this computer. Drop .gguf files here to add them.", self)
        self.caption.setWordWrap(True)
        self.caption.setAccessibleName("About installed models")
        self.tree = setup_list_tree(_DropTree(self), "Installed models", COLUMNS, stretch=5)
        self.tree.files_dropped.connect(self.import_requested)
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.tree.itemActivated.connect(lambda *_: self._use())
        self.memory = QLabel(self)
        self.memory.setAccessibleName("Loaded model memory")
        self.memory.setWordWrap(True)
        self.memory.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.memory.hide()
        self.use_button = QPushButton("Use for next turn", self)
        self.use_button.setAccessibleName("Use the selected model for the next turn")
        self.use_button.clicked.connect(self._use)
        self.import_button = QPushButton("Import…", self)
        self.import_button.setAccessibleName("Import a GGUF file")
        self.import_button.setToolTip("Add a .gguf file from this computer (it stays where it is)")
        self.import_button.clicked.connect(self.ask_import)
        self.place_button = QPushButton("How it loads…", self)
        self.place_button.setAccessibleName("Choose how the selected model loads")
        self.place_button.setToolTip(
            "GPU layers, the KV cache and its types, flash attention and drafting (Cove chooses unless you set them)"
        )
        self.place_button.clicked.connect(self._place)
        self.delete_button = QPushButton("Delete…", self)
        self.delete_button.setAccessibleName("Delete the selected model")
        self.delete_button.clicked.connect(self._delete)
        buttons = QHBoxLayout()
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.place_button)
        buttons.addStretch(1)
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.delete_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.memory)
        layout.addLayout(buttons)
        self._update_buttons()

    # ---- commands ----------------------------------------------------------------------

    def set_models(self, models: Sequence[InstalledModel], current: str | None, loaded: str | None) -> None:
        """`current`: the model the next turn uses; `loaded`: the one in the engine now."""
        selected = self.selected()
        self._models, self._current, self._loaded = list(models), current, loaded
        self.tree.blockSignals(True)
        self.tree.clear()
        for model in self._models:
            item = QTreeWidgetItem(
                [
                    model.name,
                    model.quant or "–",
                    format_bytes(model.size),
                    (model.architecture or "–") + (VISION_MARK if model.vision else ""),
                    format_int(model.context_length) if model.context_length else "–",
                    source_text(model),
                    format_age(model.last_used_at) if model.last_used_at else "never",
                ]
            )
            item.setData(0, NAME_ROLE, model.name)
            item.setToolTip(0, model.path)
            item.setToolTip(5, source_text(model))
            state = " (loaded)" if model.name == loaded else " (next turn)" if model.name == current else ""
            sees = ", reads images" if model.vision else ""
            item.setData(
                0,
                Qt.ItemDataRole.AccessibleTextRole,
                f"{model.name}{state}, {model.quant or 'unknown quant'}, {format_bytes(model.size)}{sees}",
            )
            if model.vision:
                item.setToolTip(3, f"Reads images with its vision projector {model.mmproj_path} ({format_bytes(model.mmproj_size)})")
            self.tree.addTopLevelItem(item)
            if model.name == selected:
                self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        for column in (0, 1, 2, 3, 4, 6):  # the name in full; the source column takes what is left
            self.tree.resizeColumnToContents(column)
        self._paint_marks()
        self._update_buttons()

    def select(self, name: str) -> None:
        for item in top_items(self.tree):
            if item.data(0, NAME_ROLE) == name:
                self.tree.setCurrentItem(item)
                return

    def selected(self) -> str | None:
        item = self.tree.currentItem()
        name = item.data(0, NAME_ROLE) if item is not None else None
        return name if isinstance(name, str) else None

    def names(self) -> list[str]:
        return [m.name for m in self._models]

    def rows(self) -> list[tuple[str, ...]]:
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in top_items(self.tree)]

    def set_memory(self, name: str, estimate: object | None, measured: object | None, n_ctx: int) -> None:
        """'Memory of NAME at 4,096 tokens: estimated RAM 300 MB · measured 290 MB (...)'."""
        parts = []
        if estimate is not None:
            loaded_ram = getattr(estimate, "loaded_ram", 0)
            full = estimate_figures(estimate)
            parts.append(
                f"estimated {format_bytes(loaded_ram)} after loading, {full} with the context full" if loaded_ram else f"estimated {full}"
            )
        if measured is not None:
            total = getattr(measured, "total", None)
            parts.append(
                f"measured {format_bytes(total)} (engine {format_bytes(getattr(measured, 'private', None))} "
                f"+ mapped model {format_bytes(getattr(measured, 'mapped_model', None))})"
            )
        if not parts:
            self.memory.hide()
            return
        self.memory.setText(f"Memory of {name} at {format_int(n_ctx)} tokens: " + " · ".join(parts) + ".")
        self.memory.show()

    def memory_text(self) -> str:
        return self.memory.text() if not self.memory.isHidden() else ""

    # ---- internals ---------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange:
            self._paint_marks()
        super().changeEvent(event)

    def _paint_marks(self) -> None:
        palette = self.palette()
        mark = dot_icon(palette.color(QPalette.ColorRole.Highlight), selected_color=palette.color(QPalette.ColorRole.HighlightedText))
        for item in top_items(self.tree):
            name = item.data(0, NAME_ROLE)
            item.setIcon(0, mark if name == self._loaded else blank_icon())
            item.setToolTip(
                0,
                next((m.path for m in self._models if m.name == name), "")
                + ("\nLoaded now" if name == self._loaded else "\nUsed for the next turn" if name == self._current else ""),
            )

    def _update_buttons(self) -> None:
        name = self.selected()
        self.use_button.setEnabled(name is not None and name != self._current)
        self.delete_button.setEnabled(name is not None)
        self.place_button.setEnabled(name is not None)

    def _use(self) -> None:
        name = self.selected()
        if name is not None and name != self._current:
            self.use_requested.emit(name)

    def _place(self) -> None:
        name = self.selected()
        if name is not None:
            self.placement_requested.emit(name)

    def _delete(self) -> None:
        name = self.selected()
        if name is not None:
            self.delete_requested.emit(name)

    def ask_import(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Import a GGUF model", str(Path.home()), "GGUF models (*.gguf)")
        if paths:
            self.import_requested.emit(list(paths))
