"""The message composer: a multi-line input where Enter sends and Shift+Enter breaks the line,
a Send button that turns into Stop while a reply streams, the context-window meter, and the
images attached to the message (an Attach button, a drop or a paste; ui/chat/attachment_draft.py
holds them, ui/chat/attachment_strip.py shows them above the box).

The composer never clears itself on send: the owner calls `clear()` once the message is
saved, so a failure never loses what the person typed or attached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeyEvent, QPalette, QTextCursor
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from ui.chat.attachment_draft import AttachmentDraft
from ui.chat.attachment_strip import AttachmentStrip
from ui.chat.attachments import FILE_FILTER, Attachment, Source, images_in, mime_has_images
from ui.chat.context_meter import MeterBar
from ui.theme import format_int, warning_color

WARN_FRACTION = 0.9  # the meter turns warning-colored above this share of the window
MIN_LINES = 2
MAX_LINES = 10


class _InputEdit(QPlainTextEdit):
    """Plain text input: Enter submits, Shift+Enter inserts a line break, Esc goes to the parent;
    a paste or a drop that carries images or files goes to the composer as `images_offered`."""

    submitted = Signal()
    images_offered = Signal(QMimeData)  # delivered at once (a direct connection): the data lives only during the call

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt override)
        return mime_has_images(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override)
        if mime_has_images(source):
            self.images_offered.emit(source)
            return
        super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.textCursor().insertText("\n")
            else:
                self.submitted.emit()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            event.ignore()  # the composer decides what Esc means (stop while busy)
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Where the person writes. Emits `send_requested(text)` and `stop_requested()`; the images
    attached to the message are `attachments()`."""

    send_requested = Signal(str)
    stop_requested = Signal()
    attachments_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # How the Attach button asks for files (a test puts its own here): the chosen paths.
        self.choose_files: Callable[[QWidget], Sequence[str]] = _ask_for_images
        self._busy = False
        self._send_enabled = True
        self._send_disabled_reason = ""
        self._context_warning = False

        self._input = _InputEdit(self)
        self._input.setAccessibleName("Message")
        self._input.setAccessibleDescription("Enter sends, Shift+Enter starts a new line")
        self._input.setPlaceholderText("Message the model…  (Enter to send, Shift+Enter for a new line)")
        self._input.setTabChangesFocus(True)
        self._input.submitted.connect(self._submit)
        self._input.images_offered.connect(self.attach_mime)
        self._input.document().documentLayout().documentSizeChanged.connect(self._fit_height)

        self._button = QPushButton("Send", self)
        self._button.setAccessibleName("Send message")
        self._button.setDefault(False)
        self._button.setAutoDefault(False)
        self._button.clicked.connect(self._on_button)

        self._meter_label = QLabel(self)
        self._meter_label.setAccessibleName("Context used")
        self._meter_bar = MeterBar(self)
        self._meter_bar.setAccessibleName("Context used bar")

        self._draft = AttachmentDraft(self)
        self._draft.changed.connect(self._show_attachments)
        self._strip = AttachmentStrip(self)
        self._strip.remove_requested.connect(self._draft.remove)
        self._attach_button = QToolButton(self)
        self._attach_button.setText("Attach image…")
        self._attach_button.setAccessibleName("Attach image")
        self._attach_button.setToolTip("Attach a PNG, JPEG, WebP or GIF image (or drop or paste one into the box)")
        self._attach_button.clicked.connect(self._choose_and_attach)
        self.setAcceptDrops(True)

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self._input, 1)
        row.addWidget(self._button, 0, Qt.AlignmentFlag.AlignBottom)

        self._meter_bar.setFixedWidth(120)
        meter = self._meter_row = QHBoxLayout()
        meter.setContentsMargins(0, 0, 0, 0)
        meter.addWidget(self._attach_button, 0)
        meter.addStretch(1)
        meter.addWidget(self._meter_label, 0)
        meter.addWidget(self._meter_bar, 0, Qt.AlignmentFlag.AlignVCenter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        layout.setSpacing(4)
        layout.addWidget(self._strip)
        layout.addLayout(row)
        layout.addLayout(meter)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self.set_context(None, None, approximate=False)
        self._set_context_warning(False, force=True)
        self._fit_height()

    # ---- what the person sees (handles for tests that act as the person does) -------------

    @property
    def text_box(self) -> QPlainTextEdit:
        """The box the person types in: Enter sends, Shift+Enter breaks the line, Esc stops a reply."""
        return self._input

    @property
    def send_button(self) -> QPushButton:
        """The button beside the box: Send, or Stop while a reply streams."""
        return self._button

    @property
    def attach_button(self) -> QToolButton:
        """The button under the box that opens a file dialog for images."""
        return self._attach_button

    @property
    def attachment_strip(self) -> AttachmentStrip:
        """The thumbnails of the attached images, and the line that says what was refused."""
        return self._strip

    @property
    def context_label(self) -> QLabel:
        """The meter's words ('≈ 1,234 / 8,192 tokens'), in the warning colour above WARN_FRACTION."""
        return self._meter_label

    # ---- commands from the owner -------------------------------------------------------

    def add_leading(self, widget: QWidget) -> None:
        """A control at the left of the line under the box (the conversation's Tools menu)."""
        self._meter_row.insertWidget(0, widget)

    def text(self) -> str:
        """What is typed now, exactly as typed."""
        return self._input.toPlainText()

    def set_text(self, text: str) -> None:
        """Replace the typed text (e.g. to edit an earlier message) and put the cursor at its end."""
        self._input.setPlainText(text)
        self._input.moveCursor(QTextCursor.MoveOperation.End)

    def clear(self) -> None:
        """Empty the input and drop the attached images; the owner calls this once the sent
        message is safely stored."""
        self._input.clear()
        self._draft.clear()

    def attachments(self) -> list[Attachment]:
        """The images attached to the message, in the order they were attached."""
        return self._draft.attachments()

    def set_attachments(self, attachments: Sequence[Attachment]) -> None:
        """Replace the attached images (e.g. with an earlier message's, to edit it)."""
        self._draft.set_attachments(attachments)

    def is_checking_images(self) -> bool:
        """An attached image is still being checked (sending waits for it)."""
        return self._draft.is_checking()

    def attach_files(self, paths: Sequence[str | Path], labels: Sequence[str] = ()) -> None:
        """Attach image files: each is checked off the UI thread; a refused one is said in the
        strip and not attached. `labels`: what to call them (default: their file names)."""
        names = list(labels) or [Path(p).name or str(p) for p in paths]
        self._draft.attach(Source(name, path=Path(p)) for p, name in zip(paths, names))

    def attach_data(self, data: bytes, label: str = "the pasted image") -> None:
        """Attach an image from its file's bytes (checked like a file)."""
        self._draft.attach([Source(label, data=data)])

    def attach_mime(self, mime: QMimeData) -> bool:
        """Attach the images a drop or a paste carries (image bytes, a picture, files); False
        when it carries none (its text is then the box's to paste)."""
        sources, refused = images_in(mime)
        if not sources and not refused:
            return False
        self._draft.attach(sources, refused)
        return True

    def say_about_images(self, sentence: str) -> None:
        """A sentence about the attached images, shown above the box (e.g. why a send was refused)."""
        self._draft.say(sentence)

    def focus_input(self) -> None:
        self._input.setFocus(Qt.FocusReason.OtherFocusReason)

    def is_busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        """While a reply streams the button reads Stop, and Enter does not send."""
        self._busy = busy
        if busy:
            self._button.setText("Stop")
            self._button.setAccessibleName("Stop reply")
            self._button.setToolTip("Stop the reply (Esc)")
        else:
            self._button.setText("Send")
            self._button.setAccessibleName("Send message")
            self._button.setToolTip(self._send_disabled_reason or "Send (Enter)")
        self._update_button_enabled()

    def set_send_enabled(self, enabled: bool, reason: str = "") -> None:
        """Allow or refuse sending (e.g. no model loaded); `reason` becomes the button's tooltip."""
        self._send_enabled = enabled
        self._send_disabled_reason = "" if enabled else reason
        if not self._busy:
            self._button.setToolTip(self._send_disabled_reason or "Send (Enter)")
        self._update_button_enabled()

    def set_context(self, used: int | None, size: int | None, approximate: bool) -> None:
        """Show how much of the context window the conversation fills, e.g. '≈ 1,234 / 8,192 tokens'."""
        if used is None and size is None:
            self._meter_label.setText("")
            self._meter_label.setToolTip("")
            self._meter_bar.set_fraction(0.0, warning=False)
            self._meter_bar.setVisible(False)
            self._set_context_warning(False)
            return
        self._meter_bar.setVisible(True)
        prefix = "≈ " if approximate else ""
        used_text = format_int(used) if used is not None else "?"
        size_text = format_int(size) if size else "?"
        self._meter_label.setText(f"{prefix}{used_text} / {size_text} tokens")
        if used is not None and size:
            fraction = used / size
            warning = fraction > WARN_FRACTION
            tip = f"{fraction:.0%} of the context window is in use."
            if warning:
                tip += " The oldest turns will be left out of the next reply."
            self._meter_label.setToolTip(tip)
            self._meter_bar.setToolTip(tip)
        else:
            fraction, warning = 0.0, False
            self._meter_label.setToolTip("")
            self._meter_bar.setToolTip("")
        self._meter_bar.set_fraction(fraction, warning)
        self._set_context_warning(warning)

    # ---- internals ---------------------------------------------------------------------

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        if event.key() == Qt.Key.Key_Escape and self._busy:
            self.stop_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange:
            self._set_context_warning(self._context_warning, force=True)
        super().changeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        if mime_has_images(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        if self.attach_mime(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dropEvent(event)

    def _choose_and_attach(self) -> None:
        paths = list(self.choose_files(self))
        if paths:
            self.attach_files(paths)

    def _show_attachments(self) -> None:
        self._strip.set_attachments(self._draft.attachments())
        text, warning = self._draft.note()
        self._strip.set_note(text, warning=warning)
        self.attachments_changed.emit()

    def _submit(self) -> None:
        if self._busy or not self._send_enabled:
            return
        text = self.text()
        if not text.strip() and not self._draft.attachments():
            return
        if self._draft.is_checking():
            self._draft.say("An image is still being checked; send again in a moment.", warning=False)
            return
        self.send_requested.emit(text)

    def _on_button(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        else:
            self._submit()

    def _update_button_enabled(self) -> None:
        self._button.setEnabled(self._busy or self._send_enabled)

    def _set_context_warning(self, warning: bool, force: bool = False) -> None:
        if warning == self._context_warning and not force:
            return
        self._context_warning = warning
        palette = self.palette()
        color = warning_color(palette) if warning else palette.color(QPalette.ColorRole.PlaceholderText)
        label_palette = self._meter_label.palette()
        label_palette.setColor(QPalette.ColorRole.WindowText, color)
        self._meter_label.setPalette(label_palette)

    def _fit_height(self, *_: object) -> None:
        # QPlainTextDocumentLayout reports its height in lines, wrapped lines included.
        lines = int(self._input.document().documentLayout().documentSize().height())
        lines = max(MIN_LINES, min(MAX_LINES, lines))
        margins = self._input.contentsMargins()
        doc_margin = self._input.document().documentMargin()
        height = (
            lines * self._input.fontMetrics().lineSpacing()
            + int(2 * doc_margin)
            + 3  # QPlainTextEdit needs a pixel or so beyond whole lines to show no scroll bar
            + margins.top()
            + margins.bottom()  # the frame: QFrame reports it as contents margins
        )
        self._input.setFixedHeight(height)


def _ask_for_images(parent: QWidget) -> list[str]:
    """The files the person picks in a file dialog (none when they cancel)."""
    paths, _filter = QFileDialog.getOpenFileNames(parent, "Attach images", "", FILE_FILTER)
    return paths
