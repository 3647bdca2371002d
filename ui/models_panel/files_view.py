"""One Hub repository's GGUF files in the Models panel (name, quant, size; a split model is one
row, and a vision model's projector is part of its row, marked "· vision"), the chosen file's fit
estimate for this machine (verdict, figures, what to change), and the Download button. It only
shows; the panel lists, estimates and downloads."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from models.hub_files import GGUFEntry, RepoListing
from ui.models_panel.formatting import advice_lines, estimate_figures, verdict_color
from ui.models_panel.list_tree import choose_row, setup_list_tree, top_items
from ui.theme import format_bytes, format_int, muted_color

ENTRY_ROLE = Qt.ItemDataRole.UserRole
COLUMNS = ("File", "Quant", "Size", "")
CONTEXT_SIZES = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
DEFAULT_CONTEXT = 4096
VISION_MARK = " · vision"  # after a file that comes with a vision projector


class FilesView(QWidget):
    """Emits `file_chosen(GGUFEntry)`, `fit_settings_changed()` (context size or GPU layers)
    and `download_requested(GGUFEntry)`."""

    file_chosen = Signal(object)
    fit_settings_changed = Signal()
    download_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._listing: RepoListing | None = None
        self._verdict = ""
        self._network_allowed = True
        self._state_of: Callable[[GGUFEntry], str] = lambda _e: ""
        self.title = QLabel("Choose a model on the left to see its files.", self)
        self.title.setAccessibleName("Repository")
        self.title.setWordWrap(True)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel(self)
        self.status.setAccessibleName("Files status")
        self.status.setWordWrap(True)
        self.status.hide()
        self.tree = setup_list_tree(QTreeWidget(self), "Model files", COLUMNS)
        self.tree.currentItemChanged.connect(lambda item, _previous: self._on_item(item))

        self.context_box = QComboBox(self)
        self.context_box.setAccessibleName("Context size for the estimate")
        self.context_box.setToolTip("Tokens the model can see at once; the memory for them grows with this")
        for n in CONTEXT_SIZES:
            self.context_box.addItem(f"{format_int(n)} tokens", n)
        self.context_box.setCurrentIndex(CONTEXT_SIZES.index(DEFAULT_CONTEXT))
        self.context_box.activated.connect(lambda _i: self.fit_settings_changed.emit())
        self.gpu_box = QSpinBox(self)
        self.gpu_box.setRange(0, 999)
        self.gpu_box.setAccessibleName("GPU layers for the estimate")
        self.gpu_box.setToolTip("How many layers would run on the GPU (0: all in RAM)")
        self.gpu_box.editingFinished.connect(self.fit_settings_changed.emit)

        self.verdict = QLabel(self)
        self.verdict.setAccessibleName("Fit verdict")
        vfont = self.verdict.font()
        vfont.setBold(True)
        self.verdict.setFont(vfont)
        self.figures = QLabel(self)
        self.figures.setAccessibleName("Estimated memory")
        self.figures.setWordWrap(True)
        self.advice = QLabel(self)
        self.advice.setAccessibleName("What to change to make it fit")
        self.advice.setWordWrap(True)
        self.download_button = QPushButton("Download", self)
        self.download_button.setAccessibleName("Download the chosen file")
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self._on_download)

        controls = QFormLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addRow("Context", self.context_box)
        controls.addRow("GPU layers", self.gpu_box)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.download_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.status)
        layout.addWidget(self.tree, 1)
        layout.addLayout(controls)
        layout.addWidget(self.verdict)
        layout.addWidget(self.figures)
        layout.addWidget(self.advice)
        layout.addLayout(bottom)
        self.clear_fit()

    # ---- commands ----------------------------------------------------------------------

    def set_state_provider(self, state_of: Callable[[GGUFEntry], str]) -> None:
        """`state_of(entry)` says "Installed", "Downloading" or "" for the last column."""
        self._state_of = state_of

    def set_loading(self, repo_id: str) -> None:
        self._listing = None
        self.title.setText(repo_id)
        self.tree.clear()
        self.clear_fit()
        self._say(f"Listing the GGUF files of {repo_id}…")

    def set_listing(self, listing: RepoListing, prefer: str | None = None) -> None:
        """Show the files; select `prefer` (a file name) if it is among them."""
        self._listing = listing
        self.title.setText(listing.repo_id)
        self.tree.blockSignals(True)
        self.tree.clear()
        chosen: QTreeWidgetItem | None = None
        for entry in listing.entries:
            name = entry.name + ("" if entry.complete else f" (only {len(entry.parts)} of {entry.expected_parts} parts)")
            if entry.is_split:
                name += f" · {len(entry.parts)} parts"
            if entry.projector is not None:
                name += VISION_MARK
            item = QTreeWidgetItem([name, entry.quant or "–", format_bytes(entry.download_size), self._state_of(entry)])
            item.setData(0, ENTRY_ROLE, entry)
            sees = f", reads images with {entry.projector.filename}" if entry.projector else ""
            item.setData(
                0,
                Qt.ItemDataRole.AccessibleTextRole,
                f"{entry.name}, {entry.quant or 'unknown quant'}, {format_bytes(entry.download_size)}{sees}",
            )
            if entry.projector is not None:
                item.setToolTip(
                    0,
                    f"Reads images: downloaded with its vision projector {entry.projector.filename} "
                    f"({format_bytes(entry.projector.size)}, counted in the size)",
                )
            self.tree.addTopLevelItem(item)
            if prefer and (entry.name == prefer or any(p.filename == prefer for p in entry.parts)):
                chosen = item
        self.tree.blockSignals(False)
        for column in range(1, len(COLUMNS)):
            self.tree.resizeColumnToContents(column)
        count = len(listing.entries)
        self._say("" if count else f"{listing.repo_id} has no GGUF files.")
        if chosen is not None:
            self.tree.setCurrentItem(chosen)

    def refresh_states(self) -> None:
        for item in top_items(self.tree):
            item.setText(3, self._state_of(item.data(0, ENTRY_ROLE)))
        self.tree.resizeColumnToContents(3)  # "downloading 40 %", "installed": never cut short
        self._update_button()

    def show_error(self, sentence: str) -> None:
        self._say(sentence)

    def listing(self) -> RepoListing | None:
        return self._listing

    def chosen(self) -> GGUFEntry | None:
        item = self.tree.currentItem()
        entry = item.data(0, ENTRY_ROLE) if item is not None else None
        return entry if isinstance(entry, GGUFEntry) else None

    def choose(self, row: int) -> None:
        choose_row(self.tree, row, self._on_item)

    def n_ctx(self) -> int:
        return int(self.context_box.currentData())

    def n_gpu_layers(self) -> int:
        return self.gpu_box.value()

    def set_network_allowed(self, allowed: bool) -> None:
        self._network_allowed = allowed
        self._update_button()

    def clear_fit(self) -> None:
        self._verdict = ""
        self.verdict.setText("")
        self.figures.setText("")
        self.advice.setText("")
        self._update_button()

    def set_estimating(self) -> None:
        self._verdict = ""
        self.verdict.setText("Reading the file's header to estimate its memory…")
        self.figures.setText("")
        self.advice.setText("")
        self._paint_verdict()

    def set_fit(self, estimate: object, bytes_fetched: int | None = None) -> None:
        self._verdict = str(getattr(estimate, "verdict", "") or "")
        self.verdict.setText(self._verdict[:1].upper() + self._verdict[1:])
        figures = f"Estimated need at {format_int(self.n_ctx())} tokens: {estimate_figures(estimate)}."
        if bytes_fetched:
            figures += f" Read from the first {format_bytes(bytes_fetched)} of the file."
        self.figures.setText(figures)
        self.advice.setText("\n".join(advice_lines(getattr(estimate, "advice", None))))
        self._paint_verdict()

    def set_fit_error(self, sentence: str) -> None:
        self._verdict = ""
        self.verdict.setText("")
        self.figures.setText(sentence)
        self.advice.setText("")

    def fit_text(self) -> str:
        return self.verdict.text()

    def rows(self) -> list[tuple[str, ...]]:
        return [tuple(item.text(c) for c in range(len(COLUMNS))) for item in top_items(self.tree)]

    def status_text(self) -> str:
        return self.status.text() if not self.status.isHidden() else ""

    # ---- internals ---------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange:
            self._paint_verdict()
        super().changeEvent(event)

    def _paint_verdict(self) -> None:
        palette = self.palette()
        color = verdict_color(self._verdict, palette) if self._verdict else muted_color(palette)
        label_palette = self.verdict.palette()
        label_palette.setColor(QPalette.ColorRole.WindowText, color)
        self.verdict.setPalette(label_palette)

    def _on_item(self, item: QTreeWidgetItem | None) -> None:
        self.clear_fit()
        entry = item.data(0, ENTRY_ROLE) if item is not None else None
        if isinstance(entry, GGUFEntry):
            self.file_chosen.emit(entry)
        self._update_button()

    def _update_button(self) -> None:
        entry = self.chosen()
        state = self._state_of(entry) if entry is not None else ""
        ok = entry is not None and entry.complete and self._network_allowed and not state
        self.download_button.setEnabled(ok)
        if entry is not None and not entry.complete:
            tip = "Some parts of this split model are missing on the Hub, so it cannot be loaded"
        elif state:
            tip = f"{state} already"
        elif not self._network_allowed:
            tip = "Cove is offline; turn offline mode off in Settings to download"
        else:
            sees = " with its vision projector" if entry and entry.vision else ""
            tip = f"Download {entry.name}{sees} ({format_bytes(entry.download_size)})" if entry else "Choose a file first"
        self.download_button.setToolTip(tip)

    def _on_download(self) -> None:
        entry = self.chosen()
        if entry is not None:
            self.download_requested.emit(entry)

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))
