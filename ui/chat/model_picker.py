"""The top-bar model picker: first "Auto" (ui/chat/auto_mode.py: the model chosen for each
message) when the window offers it and a model is installed, then installed models with quant and
size (marked "vision" when they have a projector to read images with, and "tools" when their chat
template knows tools, found by reading the files' headers on a worker thread), then each
connection's models (the person's own servers) under the connection's name, marked with its
host; which one is in use, load progress with a Cancel button, and the last load error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QPalette, QResizeEvent, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QSizePolicy, QWidget

from app.routing.auto import AUTO
from models.library import InstalledModel
from models.model_facts import installed_is_base
from ui.background import BackgroundJob, run_in_background
from ui.theme import blank_icon, dot_icon, error_color, format_bytes, format_int
from ui.tools.tool_models import ToolModel, tool_capable

NAME_ROLE = Qt.ItemDataRole.UserRole
AUTO_LABEL = "Auto — picks the model for each message"
AUTO_TOOLTIP = (
    "Auto chooses one of your installed models for each message: one that can serve it (images, "
    "tools, its length), then the fastest that is strong enough for what it asks. The reply's line "
    "says which model and why."
)
THIS_COMPUTER = "This computer"
TOOLS_MARK = " · tools"  # after the label of a model that can call tools
NOT_REACHABLE = " · not reachable now"  # after a server's heading and models when it did not answer
VISION_MARK = " · vision"  # in the label of a model with a vision projector: it reads images
BASE_MODEL_NOTE = (
    "A small base model: it continues text rather than following instructions, so its answers "
    "are short and often wrong. An instruct model from the catalog answers better."
)


def remote_label(model: Any) -> str:
    """'llama3.1:70b · gpu-box.lan:8000' (a RemoteModel: the model id, and where it runs)."""
    return f"{model.model_id} · {model.host}"


def _remote_tooltip(model: Any) -> str:
    lines = [f"{model.name}: on your server {model.connection} ({model.host})"]
    if model.kind:
        lines.append(f"Server: {model.kind}")
    if model.fingerprint:
        lines.append(f"Fingerprint: {model.fingerprint}")
    lines.append(f"Your messages are sent to {model.host}.")
    return "\n".join(lines)


def model_label(model: InstalledModel) -> str:
    """'gemma-3-270m-q4_k_m · Q4_K_M · 253 MB' (and ' · vision' for a model that reads images)."""
    parts = [model.name]
    if model.quant:
        parts.append(model.quant)
    parts.append(format_bytes(model.size))
    return " · ".join(parts) + (VISION_MARK if getattr(model, "mmproj_path", None) else "")


def _model_tooltip(model: InstalledModel) -> str:
    lines = [model.path]
    if model.architecture:
        lines.append(f"Architecture: {model.architecture}")
    if model.parameter_count:
        lines.append(f"Parameters: {model.parameter_count / 1e9:.2f} B")
    if model.context_length:
        lines.append(f"Trained context: {format_int(model.context_length)} tokens")
    if model.repo:
        lines.append(f"From: {model.repo}")
    if getattr(model, "mmproj_path", None):
        lines.append(f"Reads images with its vision projector: {model.mmproj_path}")
    if installed_is_base(model):
        lines.append("No chat template in the file: it is given the conversation as a transcript to continue.")
        lines.append(BASE_MODEL_NOTE)
    elif not model.has_chat_template:
        lines.append("No chat template in the file: a plain fallback format is used.")
    return "\n".join(lines)


class _ElidedLabel(QLabel):
    """One line that ends in '…' when it does not fit; the full text stays in `full_text()`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(0, self.width())))


class ModelPicker(QWidget):
    """Lists models; emits `model_chosen(name)` when the person picks one that is not loaded,
    and `load_cancel_requested()` from the Cancel button shown while loading."""

    model_chosen = Signal(str)
    opened = Signal()  # the person opened the list (the window asks its servers whether they answer)
    load_cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loaded: str | None = None
        self._loading: str | None = None
        self._names: list[str | None] = []  # per combo row: the model's name, None for a heading
        self._remote: set[str] = set()  # names of models on a connection (nothing to load)
        self._base: set[str] = set()  # names of small base models (BASE_MODEL_NOTE)
        self._tool_models: dict[str, str] = {}  # name -> tool-call format, of models that can call tools
        self._tools_job: BackgroundJob | None = None
        self._auto = False  # the window is on Auto: the Auto row is shown chosen, the loaded model keeps its mark

        self._combo = _Combo(self)
        self._combo.opening.connect(self.opened)
        self._combo.setAccessibleName("Model")
        self._combo.setPlaceholderText("Choose a model…")
        self._combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self._combo.setMinimumContentsLength(24)
        self._combo.activated.connect(self._on_activated)

        self._progress = QProgressBar(self)
        self._progress.setAccessibleName("Loading model")
        self._progress.setRange(0, 0)  # indeterminate: llama.cpp reports no load progress
        self._progress.setTextVisible(False)
        self._progress.setFixedWidth(80)
        self._progress.setMaximumHeight(8)

        self._cancel = QPushButton("Cancel", self)
        self._cancel.setAccessibleName("Cancel loading")
        self._cancel.setToolTip("Stop loading this model")
        self._cancel.clicked.connect(self.load_cancel_requested)

        self._status = _ElidedLabel(self)
        self._status.setAccessibleName("Model status")

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self._combo)
        layout.addWidget(self._progress)
        layout.addWidget(self._cancel)
        layout.addWidget(self._status, 1)
        self._show_loading(False)
        self._apply_status_palette()

    # ---- commands ----------------------------------------------------------------------

    def set_models(
        self,
        models: Sequence[InstalledModel],
        current: str | None,
        remote: Sequence[Any] = (),
        away: Mapping[str, str] | None = None,
        *,
        auto: bool = False,
    ) -> None:
        """Replace the list; `current` is the model in use (None when nothing is loaded).
        `remote`: RemoteModel entries, listed after the installed ones under their connection's name;
        `away`: {connection: why it did not answer when last asked}, marked on its heading and models;
        `auto`: offer "Auto" first (listed when there is a model, here or on a server, for it to choose)."""
        away = away or {}
        self._loaded = current
        self._names = []
        self._remote = {m.name for m in remote}
        self._base = {m.name for m in models if installed_is_base(m)}
        self._find_tool_models(list(models))
        self._combo.blockSignals(True)
        self._combo.clear()
        self._combo.setPlaceholderText("Choose a model…" if models or remote else "No models installed")
        if auto and (models or remote):
            self._add_item(AUTO, AUTO_LABEL, AUTO_TOOLTIP)
        if remote and models:
            self._add_heading(THIS_COMPUTER)
        for model in models:
            self._add_item(model.name, model_label(model), _model_tooltip(model))
        connection = None
        for model in remote:
            if model.connection != connection:
                connection = model.connection
                self._add_heading(f"{connection} · {model.host}" + (NOT_REACHABLE if connection in away else ""))
            why = away.get(model.connection)
            label = remote_label(model) + (NOT_REACHABLE if why else "")
            self._add_item(model.name, label, _remote_tooltip(model) + (f"\nNot reachable now: {why}" if why else ""))
        self._combo.setEnabled(self._choosable() and self._loading is None)
        self._combo.blockSignals(False)
        self._refresh_marks()
        if self._loading is None and self._status.property("isError") is not True:
            self._set_status(self._idle_status(), error=False)

    def model_names(self) -> list[str]:
        """The names of the models listed, in order (headings and Auto left out)."""
        return [name for name in self._names if name is not None and name != AUTO]

    def _add_heading(self, text: str) -> None:
        """A row that names a group (the computer, or a connection); it cannot be chosen."""
        if self._combo.count():
            self._combo.insertSeparator(self._combo.count())
            self._names.append(None)
        self._combo.addItem(text)
        self._names.append(None)
        model = self._combo.model()
        if isinstance(model, QStandardItemModel):
            item = model.item(self._combo.count() - 1)
            item.setEnabled(False)
            font = item.font()
            font.setBold(True)
            item.setFont(font)

    def _add_item(self, name: str, label: str, tooltip: str) -> None:
        if name in self._tool_models and name != AUTO:  # known from the last reading; read again meanwhile
            label += TOOLS_MARK
        self._combo.addItem(blank_icon(), label, name)
        self._names.append(name)
        index = self._combo.count() - 1
        self._combo.setItemData(index, tooltip, Qt.ItemDataRole.ToolTipRole)
        self._combo.setItemData(index, label, Qt.ItemDataRole.AccessibleTextRole)

    def _find_tool_models(self, models: list[InstalledModel]) -> None:
        """Which models can call tools, read from their files off the UI thread; marked when known."""
        if self._tools_job is not None:
            self._tools_job.dropped = True
        self._tools_job = run_in_background(self, lambda: tool_capable(models), on_done=self.mark_tool_models, name="cove-tool-models")

    def mark_tool_models(self, found: Sequence[ToolModel]) -> None:
        """Mark the rows of models whose chat template knows tools ("· tools", and why in the tooltip)."""
        self._tools_job = None
        self._tool_models = {m.name: m.family for m in found}
        for index, name in enumerate(self._names):
            family = self._tool_models.get(name) if name is not None and name != AUTO else None
            if family is None:
                continue
            label = self._combo.itemText(index)
            if not label.endswith(TOOLS_MARK):
                label += TOOLS_MARK
                self._combo.setItemText(index, label)
                self._combo.setItemData(index, label, Qt.ItemDataRole.AccessibleTextRole)
            tip = str(self._combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
            note = f"Can call tools: its chat template knows them ({family} format)."
            if note not in tip:
                self._combo.setItemData(index, f"{tip}\n{note}" if tip else note, Qt.ItemDataRole.ToolTipRole)

    @property
    def tool_models(self) -> Mapping[str, str]:
        """The listed models whose chat template knows tools, name -> tool-call format, as last read
        (the rows marked "· tools")."""
        return self._tool_models

    def _choosable(self) -> bool:
        return any(name is not None for name in self._names)

    def names(self) -> list[str]:
        """The names the person can choose, in the order shown ("auto" first when Auto is offered)."""
        return [name for name in self._names if name is not None]

    def set_auto(self, on: bool) -> None:
        """The window is on Auto (or no longer): the Auto row shows as chosen, while the loaded
        model's row keeps its mark."""
        self._auto = on
        if self._loading is None:
            self._select(self._loaded)

    def auto(self) -> bool:
        return self._auto

    def set_loading(self, name: str, loading: bool) -> None:
        """Show (or hide) the indeterminate progress and the Cancel button for `name`."""
        if loading:
            self._loading = name
            self._select(name)
            self._set_status(f"Loading {name}…", error=False)
        else:
            if self._loading == name or self._loading is None:
                self._loading = None
            if self._status.property("isError") is not True:
                self._set_status(self._idle_status(), error=False)
            self._select(self._loaded)
        self._show_loading(self._loading is not None)

    def set_loaded(self, name: str | None) -> None:
        """`name` is now loaded (None: no model loaded); clears loading state and any error."""
        self._loaded = name
        self._loading = None
        self._show_loading(False)
        self._set_status(self._idle_status(), error=False)
        self._refresh_marks()

    def _idle_status(self) -> str:
        """The status line with nothing loading and no error: what a base model in use is."""
        return BASE_MODEL_NOTE if self._loaded is not None and self._loaded in self._base else ""

    def set_error(self, sentence: str) -> None:
        """Show why the last load failed; the combo returns to the model that is still loaded."""
        self._loading = None
        self._show_loading(False)
        self._set_status(sentence, error=True)
        self._select(self._loaded)

    def loaded(self) -> str | None:
        return self._loaded

    def status_text(self) -> str:
        return self._status.full_text()

    # ---- what the person sees (handles for tests that act as the person does) -------------

    @property
    def combo(self) -> QComboBox:
        """The drop-down the person picks a model in: its rows (headings, separators, models with
        their tooltips and accessible text), the row in use, and whether it can be opened now."""
        return self._combo

    @property
    def cancel_button(self) -> QPushButton:
        """Cancel, shown while a model loads."""
        return self._cancel

    @property
    def progress_bar(self) -> QProgressBar:
        """The indeterminate bar shown while a model loads."""
        return self._progress

    @property
    def status_label(self) -> QLabel:
        """The line after the controls: loading, the last load error, or what a base model in use is;
        elided to fit, the whole sentence in its tooltip (`status_text()` gives it too)."""
        return self._status

    # ---- internals ---------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_status_palette()
            self._refresh_marks()
        super().changeEvent(event)

    def _on_activated(self, index: int) -> None:
        name = self._combo.itemData(index, NAME_ROLE)
        if name == AUTO and self._auto:
            return  # on Auto already
        if isinstance(name, str) and (name != self._loaded or self._auto) and name != self._loading:
            self.model_chosen.emit(name)  # a model chosen while on Auto leaves Auto, loaded or not

    def _select(self, name: str | None) -> None:
        if self._auto and AUTO in self._names:
            name = AUTO
        index = self._names.index(name) if name is not None and name in self._names else -1
        self._combo.blockSignals(True)
        self._combo.setCurrentIndex(index)
        self._combo.blockSignals(False)

    def _refresh_marks(self) -> None:
        palette = self.palette()
        mark = dot_icon(
            palette.color(QPalette.ColorRole.Highlight),
            selected_color=palette.color(QPalette.ColorRole.HighlightedText),
        )
        for index, name in enumerate(self._names):
            if name is None or name == AUTO:
                continue
            loaded = name == self._loaded
            self._combo.setItemIcon(index, mark if loaded else blank_icon())
            label = self._combo.itemData(index, Qt.ItemDataRole.AccessibleTextRole) or ""
            suffix = " (in use)" if name in self._remote else " (loaded)"
            base = label[: -len(suffix)] if label.endswith(suffix) else label
            self._combo.setItemData(index, base + (suffix if loaded else ""), Qt.ItemDataRole.AccessibleTextRole)
        if self._loading is None:
            self._select(self._loaded)

    def _show_loading(self, loading: bool) -> None:
        self._progress.setVisible(loading)
        self._cancel.setVisible(loading)
        self._combo.setEnabled(not loading and self._choosable())

    def _set_status(self, text: str, error: bool) -> None:
        self._status.set_full_text(text)
        self._status.setToolTip(text)
        self._status.setAccessibleDescription(text)
        self._status.setProperty("isError", error)
        self._status.setVisible(bool(text))
        self._apply_status_palette()

    def _apply_status_palette(self) -> None:
        palette = self.palette()
        color = error_color(palette) if self._status.property("isError") else palette.color(QPalette.ColorRole.PlaceholderText)
        status_palette = self._status.palette()
        status_palette.setColor(QPalette.ColorRole.WindowText, color)
        self._status.setPalette(status_palette)


class _Combo(QComboBox):
    """The picker's list; `opening` just before it shows."""

    opening = Signal()

    def showPopup(self) -> None:  # noqa: N802 (Qt name)
        self.opening.emit()
        super().showPopup()
