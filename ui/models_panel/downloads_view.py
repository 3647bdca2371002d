"""Downloads in the Models panel: one row per download with a progress bar, bytes, speed and
time left, and Pause / Resume / Cancel; downloads an earlier run left unfinished, offered for
resuming; a finished one offers "Use for next turn". It only shows and asks; the panel acts."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QScrollArea, QVBoxLayout, QWidget

from models.download.partial import ResumableDownload
from models.projector import is_projector_name
from models.units import format_duration
from ui.models_panel.download_bridge import ACTIVE_STATES, DownloadRow
from ui.models_panel.formatting import format_speed
from ui.theme import format_bytes

STATE_WORDS = {
    "starting": "Starting…",
    "running": "Downloading",
    "retrying": "Retrying",
    "paused": "Paused",
    "failed": "Stopped",
    "cancelled": "Cancelled",
    "finished": "Installed",
    "unusable": "Downloaded, not added",
}


def progress_line(row: DownloadRow) -> str:
    """'Downloading · 42% · 1.2 GB of 2.9 GB · 35 MB/s · 48 s left' (or the row's sentence)."""
    parts = [STATE_WORDS.get(row.state, row.state)]
    if row.total:
        parts.append(f"{100 * row.fraction:.0f}% · {format_bytes(row.bytes_done)} of {format_bytes(row.total)}")
    if row.state == "running":
        parts.append(format_speed(row.speed))
        if row.eta is not None:
            parts.append(f"{format_duration(row.eta)} left")
    text = " · ".join(parts)
    return f"{text}. {row.message}" if row.message else text


def _button(text: str, name: str, parent: QWidget) -> QPushButton:
    button = QPushButton(text, parent)
    button.setAccessibleName(name)
    return button


class _RowWidget(QFrame):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(self)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(10)
        self.line = QLabel(self)
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.wanted: list[tuple[str, str]] | None = None  # the buttons shown now: (text, action)
        self.buttons = QHBoxLayout()
        self.buttons.setContentsMargins(0, 0, 0, 0)
        self.buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.title)
        layout.addWidget(self.bar)
        layout.addWidget(self.line)
        layout.addLayout(self.buttons)

    def add_button(self, button: QPushButton) -> QPushButton:
        self.buttons.addWidget(button)
        return button


class DownloadsView(QWidget):
    """Emits `pause_requested(key)`, `resume_requested(key)`, `cancel_requested(key)`,
    `forget_requested(key)`, `use_requested(model name)`, and for downloads an earlier run
    left: `resume_left_requested(ResumableDownload)`, `discard_left_requested(ResumableDownload)`."""

    pause_requested = Signal(int)
    resume_requested = Signal(int)
    cancel_requested = Signal(int)
    forget_requested = Signal(int)
    use_requested = Signal(str)
    resume_left_requested = Signal(object)
    discard_left_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: dict[int, _RowWidget] = {}
        self._left: list[_RowWidget] = []
        self.empty = QLabel("No downloads. Choose a file under Discover and press Download.", self)
        self.empty.setAccessibleName("Downloads status")
        self.empty.setWordWrap(True)
        inner = QWidget()
        self._list = QVBoxLayout(inner)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(inner)
        scroll.setAccessibleName("Downloads")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty)
        layout.addWidget(scroll, 1)

    # ---- commands ----------------------------------------------------------------------

    def update_row(self, row: DownloadRow) -> None:
        """Show `row` (a new download, or new figures for a shown one); cancelled rows go."""
        widget = self._rows.get(row.key)
        if row.state == "cancelled":
            if widget is not None:
                del self._rows[row.key]
                self._list.removeWidget(widget)
                widget.deleteLater()
                self.forget_requested.emit(row.key)
            self._update_empty()
            return
        if widget is None:
            widget = _RowWidget(self)
            self._rows[row.key] = widget
            self._list.insertWidget(self._list.count() - 1 - len(self._left), widget)
        widget.setProperty("state", row.state)
        widget.title.setText(f"{row.label} — {row.repo}")
        widget.bar.setValue(int(1000 * row.fraction) if row.total else 0)
        widget.bar.setRange(0, 0 if row.state in ("starting", "retrying") and not row.total else 1000)
        widget.bar.setVisible(row.state not in ("finished", "unusable"))
        widget.line.setText(progress_line(row))
        widget.setAccessibleName(f"Download of {row.label}")
        widget.setAccessibleDescription(progress_line(row))
        self._set_buttons(widget, row)
        self._update_empty()

    def set_left_unfinished(self, left: Sequence[ResumableDownload]) -> None:
        """Offer to resume (or discard) what an earlier run left."""
        for widget in self._left:
            self._list.removeWidget(widget)
            widget.deleteLater()
        self._left = []
        for item in left:
            widget = _RowWidget(self)
            name = _left_name(item.filenames)
            widget.title.setText(f"{name} — {item.repo}")
            fraction = item.bytes_done / item.total if item.total else 0.0
            widget.bar.setValue(int(1000 * fraction))
            widget.line.setText(
                f"Left unfinished by an earlier session at {100 * fraction:.0f}% "
                f"({format_bytes(item.bytes_done)} of {format_bytes(item.total)}). Resume continues from there."
            )
            widget.setAccessibleName(f"Unfinished download of {item.filenames[0]}")
            widget.add_button(_button("Resume", f"Resume {item.filenames[0]}", widget)).clicked.connect(
                lambda _=False, i=item: self.resume_left_requested.emit(i)
            )
            widget.add_button(_button("Discard", f"Discard the partial {item.filenames[0]}", widget)).clicked.connect(
                lambda _=False, i=item: self.discard_left_requested.emit(i)
            )
            self._list.insertWidget(self._list.count() - 1, widget)
            self._left.append(widget)
        self._update_empty()

    def lines(self) -> list[str]:
        """Each shown row's progress line (downloads first, then ones left unfinished)."""
        return [w.line.text() for w in self._rows.values()] + [w.line.text() for w in self._left]

    def left_count(self) -> int:
        return len(self._left)

    def active_count(self) -> int:
        return sum(1 for w in self._rows.values() if w.property("state") in (*ACTIVE_STATES, "paused"))

    def row_buttons(self, key: int) -> dict[str, QPushButton]:
        """The row's buttons by their text (tests press them)."""
        widget = self._rows.get(key)
        if widget is None:
            return {}
        return {b.text(): b for b in widget.findChildren(QPushButton) if not b.isHidden()}

    def left_buttons(self, index: int) -> dict[str, QPushButton]:
        return {b.text(): b for b in self._left[index].findChildren(QPushButton)}

    # ---- internals ---------------------------------------------------------------------

    def _set_buttons(self, widget: _RowWidget, row: DownloadRow) -> None:
        wanted: list[tuple[str, str]]
        if row.state in ACTIVE_STATES:
            wanted = [("Pause", "pause"), ("Cancel", "cancel")]
        elif row.state in ("paused", "failed"):
            wanted = [("Resume", "resume"), ("Cancel", "cancel")]
        elif row.state == "finished" and row.model_name:
            wanted = [("Use for next turn", "use"), ("Clear", "forget")]
        else:
            wanted = [("Clear", "forget")]
        if widget.wanted == wanted:
            return
        for button in widget.findChildren(QPushButton):
            widget.buttons.removeWidget(button)
            button.hide()
            button.deleteLater()
        key, name = row.key, row.model_name or ""
        for text, action in wanted:
            button = widget.add_button(_button(text, f"{text} {row.label}", widget))
            if action == "pause":
                button.clicked.connect(lambda _=False: self.pause_requested.emit(key))
            elif action == "resume":
                button.clicked.connect(lambda _=False: self.resume_requested.emit(key))
            elif action == "cancel":
                button.clicked.connect(lambda _=False: self.cancel_requested.emit(key))
            elif action == "use":
                button.clicked.connect(lambda _=False: self.use_requested.emit(name))
            else:
                button.clicked.connect(lambda _=False, w=widget: self._forget(key, w))
        widget.wanted = wanted

    def _forget(self, key: int, widget: _RowWidget) -> None:
        self._rows.pop(key, None)
        self._list.removeWidget(widget)
        widget.deleteLater()
        self.forget_requested.emit(key)
        self._update_empty()

    def _update_empty(self) -> None:
        self.empty.setVisible(not self._rows and not self._left)


def _left_name(filenames: Sequence[str]) -> str:
    """'model.gguf (+2 parts)', with ' + its vision projector' when the last file is one."""
    names = list(filenames)
    projector = len(names) > 1 and is_projector_name(names[-1])
    parts = len(names) - 1 - int(projector)
    return names[0] + (f" (+{parts} parts)" if parts else "") + (" + its vision projector" if projector else "")
