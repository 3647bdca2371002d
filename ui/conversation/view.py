"""The conversation: a QListView of messages painted by MessageDelegate, streaming-aware.

Only painted rows (and a screen around them) are rendered; other rows carry an estimated
height. A streaming reply's text is its StreamingReply, drawn on a ReplySurface over its row:
a frame repaints what the reply says changed, and lays the list out again only when the row
grows. The view follows new text only while the person
is at the bottom, and keeps the row under the top edge still when rows above change height.
Links never open without the person confirming the full address (ui/conversation/link_policy.py).
A reply's reasoning is a collapsed line above its answer (ui/conversation/reasoning_rows.py).
A message's images are thumbnails above its text (ui/conversation/image_rows.py), read from the
images folder `set_image_store` names; a click opens one larger (ui/conversation/image_viewer.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPoint, QRect, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QKeyEvent, QKeySequence, QMouseEvent, QPaintEvent, QRegion, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QFrame, QListView, QToolTip, QWidget

from app.images.store import ImageStore
from app.statuses import MessageStatus
from ui.conversation.delegate import Hit, MessageDelegate
from ui.conversation.image_rows import IMAGE
from ui.conversation.image_viewer import ImageViewer
from ui.conversation.item_model import ConversationModel
from ui.conversation.link_dialog import confirm_with_dialog
from ui.conversation.link_policy import classify_url
from ui.conversation.reasoning_clock import ThinkingClock
from ui.conversation.reasoning_rows import COPY_REASONING, REASONING, append_reasoning, end_reasoning, toggle_reasoning
from ui.conversation.row_layout import ALWAYS, REGENERATE_WITH
from ui.conversation.streaming.reply import Damage
from ui.conversation.streaming.reply_surface import ReplySurface
from ui.conversation.tool_rows import toggle_tool_row

_STREAMING = MessageStatus.STREAMING
_BOTTOM_SLACK = 4  # pixels from the end that still count as "at the bottom"
_PREFETCH_SCREENS = 1.0  # lay out rows this many viewport heights above and below the visible ones


class ConversationView(QListView):
    """Shows a ConversationModel; all person-facing actions come out as past-tense signals."""

    text_copied = Signal(str)  # the text put on the clipboard (a message or a code block)
    retry_requested = Signal(str)  # message id of a reply that did not complete
    regenerate_requested = Signal(str)  # message id of a complete reply
    regenerate_with_requested = Signal(str, str)  # message id of a complete Auto reply, the model to write it instead
    always_requested = Signal(str)  # message id of an Auto reply: use its model for its kind of task from now on
    edit_requested = Signal(str)  # message id of a user message
    version_requested = Signal(str, int)  # message id, -1 for ‹ and +1 for ›
    link_confirmed = Signal(str)  # the person agreed and the URL was handed to the browser
    link_refused = Signal(str)  # a link the policy never opens (file:, javascript:, …)
    top_reached = Signal()  # the person scrolled to the very top (the owner may show earlier messages)
    source_activated = Signal(str, str, int)  # message id, "source" (show the passage) or "open_source", its [n]
    image_opened = Signal(object)  # the ImageViewer just opened (a message's image, larger)

    def __init__(
        self, parent: QWidget | None = None, *, model: ConversationModel | None = None, confirm_open: Callable[[str], bool] | None = None
    ) -> None:
        super().__init__(parent)
        self._confirm_open = confirm_open or (lambda url: confirm_with_dialog(self, url))
        self._stick_to_bottom = True
        self._pending_anchor: tuple[str, int, int] | None = None
        self._adjusting = False
        self._prefetch_timer = QTimer(self)
        self._prefetch_timer.setSingleShot(True)
        self._prefetch_timer.timeout.connect(self._prefetch_layouts)
        self._delegate = MessageDelegate(self)
        self._surface = ReplySurface(self.viewport())  # the streaming reply's text, drawn over its row
        self._delegate.text_drawn_over = self._surface.covers
        # One timer for markdown renders of streaming replies' tails that come due.
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        # Precise: a coarse timer may fire up to 5% early, before the render is due, and each
        # early firing would cost one more frame of the streaming row.
        self._render_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._render_timer.timeout.connect(self._render_due_tails)
        self._due_ids: set[str] = set()
        self._width_timer = QTimer(self)  # a resize re-estimates every row, once it settles
        self._width_timer.setSingleShot(True)
        self._width_timer.setInterval(40)
        self._width_timer.timeout.connect(self._on_width_changed)
        self._thinking = ThinkingClock(self.conversation_model, self)  # "Thinking… 14 s" between frames
        self.setObjectName("conversationView")
        self.setAccessibleName("Conversation")
        self.setAccessibleDescription("Messages of this conversation, oldest first. Ctrl+C copies the current one.")
        self.setUniformItemSizes(False)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Always on: a scroll bar that appears and disappears changes the width, hence every height.
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMouseTracking(True)
        self.verticalScrollBar().setSingleStep(24)

        self._delegate.reset_style()
        self.setItemDelegate(self._delegate)
        self._delegate.hit_activated.connect(self._on_hit)
        self._delegate.heights_changed.connect(self._on_heights_changed)
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_scrolled)
        self.setModel(model if model is not None else ConversationModel(self))

    # --- public ----------------------------------------------------------------------------

    def conversation_model(self) -> ConversationModel:
        model = self.model()
        assert isinstance(model, ConversationModel)
        return model

    def message_delegate(self) -> MessageDelegate:
        return self._delegate

    def setModel(self, model: ConversationModel) -> None:  # type: ignore[override]  # the view shows only a ConversationModel
        self._surface.stop()
        old = self.model()
        if isinstance(old, ConversationModel):
            old.modelAboutToBeReset.disconnect(self._before_reset)
            old.text_appended.disconnect(self._on_text_appended)
            old.row_size = None
        self._delegate.set_model(model)
        self._conversation = model
        super().setModel(model)
        model.modelAboutToBeReset.connect(self._before_reset)
        model.text_appended.connect(self._on_text_appended)
        model.row_size = self._delegate.size_for_new_row
        self._delegate.write_heights(new_cells=True)
        self._stick_to_bottom = True
        self._pending_anchor = None

    def set_image_store(self, store: ImageStore | None) -> None:
        """Where the messages' images are read from (the history's images folder)."""
        self._delegate.thumbnails.set_store(store)
        self.viewport().update()

    def open_image(self, message_id: str, index: int) -> ImageViewer | None:
        """Show the message's image `index` larger, in a dialog Esc closes."""
        row = self.conversation_model().row_of(message_id)
        images = self.conversation_model().item(row).images if row >= 0 else ()
        if not 0 <= index < len(images):
            return None
        viewer = ImageViewer(self._delegate.thumbnails.store, images[index], self.window())
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        viewer.open()
        self.image_opened.emit(viewer)
        return viewer

    def scroll_to_message(self, message_id: str) -> None:
        row = self.conversation_model().row_of(message_id)
        if row >= 0:
            self.scrollTo(self.model().index(row, 0), QAbstractItemView.ScrollHint.PositionAtTop)

    def text_surfaces(self) -> list[QWidget]:
        """The widgets messages are painted on: the viewport, and the surface over a streaming
        reply's row (benches watch their paints)."""
        return [self.viewport(), self._surface]

    def reply_surface(self) -> ReplySurface:
        return self._surface

    def is_at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - _BOTTOM_SLACK

    def open_link(self, url: str) -> bool:
        """Open a link from model output: only http(s), only after the person confirmed the full URL."""
        if classify_url(url) != "confirm":
            self.link_refused.emit(url)
            QToolTip.showText(self.mapToGlobal(self.rect().center()), f"Cove does not open this kind of link:\n{url}", self)
            return False
        if not self._confirm_open(url):
            return False
        QDesktopServices.openUrl(QUrl(url, QUrl.ParsingMode.StrictMode))
        self.link_confirmed.emit(url)
        return True

    def copy_message(self, message_id: str) -> None:
        """Copy a message's text: a reply's answer, never its reasoning."""
        row = self.conversation_model().row_of(message_id)
        if row >= 0:
            self._copy(self.conversation_model().item(row).content)

    def append_reasoning(self, message_id: str, text: str, t: float) -> None:
        """Reasoning a streaming reply wrote this frame (`t`: time.perf_counter() when its first
        piece arrived): its row shows "Thinking… N s", collapsed, and the seconds move."""
        if append_reasoning(self.conversation_model(), message_id, text, t, self._thinking.clock()):
            self._thinking.watch(message_id)

    def end_reasoning(self, message_id: str, thought_ms: float) -> None:
        """The reply began its answer (or ended) after thinking `thought_ms`: "Thought for N s"."""
        end_reasoning(self.conversation_model(), message_id, thought_ms)

    def toggle_reasoning(self, message_id: str) -> bool:
        """Open a reply's reasoning, or close it; False when it has none."""
        return toggle_reasoning(self.conversation_model(), message_id)

    @property
    def thinking_clock(self) -> ThinkingClock:
        """What moves the seconds of a thinking reply (a test sets its clock and drives its timer)."""
        return self._thinking

    # --- model and layout ------------------------------------------------------------------
    # Heights: every row has one in the model (Qt.SizeHintRole). Rows are estimated when they
    # arrive and measured exactly when painted or about to be (prefetch). Any change of height
    # leads to one delayed QListView relayout, which reads the heights in C++ (cheap).

    def _before_reset(self) -> None:
        # set_messages replaces every row (a version switch, a finished turn): keep the person's
        # place unless they were following the bottom.
        self._pending_anchor = None if self._stick_to_bottom else self._top_anchor()

    def reset(self) -> None:
        self._surface.stop()
        super().reset()
        self._delegate.forget_missing()
        if not self._sizes_from_model():
            self._delegate.write_heights(new_cells=True)
        self._stick_to_bottom = self._pending_anchor is None
        self.scheduleDelayedItemsLayout()

    def rowsAboutToBeRemoved(self, parent: QModelIndex | QPersistentModelIndex, start: int, end: int) -> None:
        self._surface.stop()
        super().rowsAboutToBeRemoved(parent, start, end)

    def rowsInserted(self, parent: QModelIndex | QPersistentModelIndex, start: int, end: int) -> None:
        if not self._sizes_from_model():
            self._delegate.write_heights(range(start, end + 1), new_cells=True)
        super().rowsInserted(parent, start, end)

    def _sizes_from_model(self) -> bool:
        """True when new rows got their first height from our delegate as they were created."""
        model = self.model()
        return isinstance(model, ConversationModel) and model.row_size == self._delegate.size_for_new_row

    def dataChanged(
        self, top_left: QModelIndex | QPersistentModelIndex, bottom_right: QModelIndex | QPersistentModelIndex, roles: Sequence[int] = ()
    ) -> None:
        # QListView answers any dataChanged with a relayout of every row. A row whose height did
        # not change only needs repainting.
        if not top_left.isValid():
            return
        if top_left.row() == bottom_right.row():
            if self._row_changed(top_left.row()):
                return
        else:
            self._delegate.write_heights(range(top_left.row(), bottom_right.row() + 1))
        super().dataChanged(top_left, bottom_right, list(roles))

    def _on_text_appended(self, row: int) -> None:
        if not self._row_changed(row, text_only=True):
            index = self.model().index(row, 0)
            super().dataChanged(index, index, [])  # its height changed: the list lays out again

    def _row_changed(self, row: int, *, text_only: bool = False) -> bool:
        """Show the row's new state (`text_only`: only its text grew); True when that needed no
        relayout of the list. A streaming row's reply takes its text and names what to repaint;
        few Qt calls on that path: each costs microseconds on the caches the engine empties."""
        item = self._conversation.item(row)
        streaming = item.status == _STREAMING
        damage = self._delegate.append_streamed(item) if streaming else None
        if damage is not None:
            if damage.due is not None:
                self._render_in(item.id, damage.due)
            if self._delegate.keeps_room(item, damage.height, text_only=text_only):
                self._repaint_reply(row, damage)
                return True
        relaid = self._delegate.settle_row(row)
        if streaming:  # a reply laid out for the first time may have a render to come
            reply = self._delegate.docs.stream(item.id)
            due = None if reply is None else reply.due_in()
            if due is not None:
                self._render_in(item.id, due)
        if relaid:  # its height changed
            if self._place_surface(row) and damage is not None:  # where it is until the list lays out again
                self._surface.repaint_damage(damage.rects)
            return False
        self.viewport().update(self.visualRect(self.model().index(row, 0)))
        if self._place_surface(row):
            self._surface.update()
        return True

    def _repaint_reply(self, row: int, damage: Damage) -> None:
        """Repaint what a frame of the streaming reply at `row` changed: on the surface over it,
        or (when there is none: a faded or disabled row) on the viewport."""
        if self._surface.row == row or self._place_surface(row):
            self._surface.repaint_damage(damage.rects)
            return
        lay = self._delegate.layout_for(self.conversation_model().item(row))
        rect = self.visualRect(self.model().index(row, 0))
        area = QRect(rect.x() + lay.doc_left, rect.y() + lay.doc_top, rect.width() - lay.doc_left, lay.doc_room)
        region = QRegion()
        for x, y, width, height in damage.rects:
            region += QRect(area.x() + x, area.y() + y, width, height).intersected(area)
        self.viewport().update(region)

    def _place_surface(self, row: int) -> bool:
        """Put the surface over `row`'s text when the row is a streaming reply shown unfaded in an
        enabled view (else take it away); True when it is there."""
        model = self.conversation_model()
        item = model.item(row) if 0 <= row < model.item_count() else None
        if item is None or item.status != MessageStatus.STREAMING or not item.seen_by_model or not self.isEnabled():
            if self._surface.row == row or self._surface.row >= model.item_count():
                self._surface.stop()
            return False
        lay = self._delegate.layout_for(item)  # the cached one when it is current
        reply = self._delegate.docs.stream(item.id)
        rect = self.visualRect(model.index(row, 0))
        if lay.doc is None or reply is None or reply.document is not lay.doc or not rect.isValid():
            self._surface.stop()
            return False
        right = lay.card.right() if lay.card.isValid() else lay.width
        geometry = QRect(rect.x() + lay.doc_left, rect.y() + lay.doc_top, max(1, right - lay.doc_left), max(1, lay.doc_room))
        viewport = self.viewport()
        self._surface.place(
            row, item.id, reply, geometry, self._delegate.stream_text_color, viewport.palette().color(viewport.backgroundRole())
        )
        return True

    def _render_in(self, message_id: str, due: float) -> None:
        """Give the reply `message_id` a frame in `due` seconds (a markdown render of its tail
        comes due), unless one is asked for already."""
        self._due_ids.add(message_id)
        if not self._render_timer.isActive():
            self._render_timer.start(max(1, math.ceil(due * 1000)))

    def _render_due_tails(self) -> None:
        # The same text again: the reply renders its tail if that is due (and asks again if not).
        ids, self._due_ids = self._due_ids, set()
        model = self.conversation_model()
        for message_id in ids:
            row = model.row_of(message_id)
            if row >= 0:
                index = model.index(row, 0)
                self.dataChanged(index, index, [])

    def paintEvent(self, event: QPaintEvent) -> None:
        # The delegate draws a row's document only inside the exposed rect: a token repaints
        # the last lines of the streaming reply, not every visible line of it.
        self._delegate.paint_region = event.rect()
        try:
            super().paintEvent(event)
        finally:
            self._delegate.paint_region = None

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._surface.stop()  # the rows get another width: the next frame follows the row again
        super().resizeEvent(event)
        if self._delegate.row_width() != max(120, self.viewport().width()):
            self._delegate.forget_width()
            self._width_timer.start()

    def _on_width_changed(self) -> None:
        if self._delegate.write_heights():
            self.scheduleDelayedItemsLayout()

    def _on_heights_changed(self) -> None:
        if self._delegate.write_dirty():
            self.scheduleDelayedItemsLayout()

    def doItemsLayout(self) -> None:
        anchor, self._pending_anchor = self._pending_anchor, None
        if anchor is None and not self._stick_to_bottom:
            anchor = self._top_anchor()
        super().doItemsLayout()
        self._follow_streaming_row()
        if anchor is not None:
            self._restore_anchor(anchor)
        elif self._stick_to_bottom:
            self._set_scroll(self.verticalScrollBar().maximum())
        self._prefetch_timer.start(0)

    def _top_anchor(self) -> tuple[str, int, int] | None:
        """(message id, row, pixel offset of its top) of the row under the top edge."""
        index = self.indexAt(QPoint(1, 1))
        model = self.model()
        if not index.isValid() or not isinstance(model, ConversationModel) or index.row() >= model.item_count():
            return None
        return model.item(index.row()).id, index.row(), self.visualRect(index).top()

    def _restore_anchor(self, anchor: tuple[str, int, int]) -> None:
        message_id, old_row, offset = anchor
        model = self.conversation_model()
        row = model.row_of(message_id)
        if row < 0:  # replaced by a sibling version: it took the same place
            row = old_row if old_row < model.item_count() else -1
        if row < 0:
            self._stick_to_bottom = True
            self._set_scroll(self.verticalScrollBar().maximum())
            return
        rect = self.visualRect(model.index(row, 0))
        if rect.isValid() and rect.top() != offset:
            self._set_scroll(self.verticalScrollBar().value() + rect.top() - offset)

    def _set_scroll(self, value: int) -> None:
        self._adjusting = True
        try:
            self.verticalScrollBar().setValue(value)
        finally:
            self._adjusting = False

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._stick_to_bottom:
            self._set_scroll(maximum)

    def _on_scrolled(self, value: int) -> None:
        if not self._adjusting:
            bar = self.verticalScrollBar()
            self._stick_to_bottom = value >= bar.maximum() - _BOTTOM_SLACK
            if value == bar.minimum() and bar.maximum() > bar.minimum():
                self.top_reached.emit()
        self._prefetch_timer.start(0)

    def _prefetch_layouts(self) -> None:
        """Measure the rows on screen and around it now, so scrolling meets measured rows."""
        model = self.model()
        if not isinstance(model, ConversationModel) or model.item_count() == 0:
            return
        height = self.viewport().height()
        margin = round(height * _PREFETCH_SCREENS)
        first = self.indexAt(QPoint(1, 1))
        first_row = first.row() if first.isValid() else 0
        rows: list[int] = []
        for step, start, limit in ((-1, first_row - 1, margin), (1, first_row, height + margin)):
            row, covered = start, 0
            while 0 <= row < model.item_count() and covered < limit:
                rows.append(row)
                covered += self._delegate.layout_for(model.item(row)).height
                row += step
        if self._delegate.write_heights(rows, exact=True):
            self.scheduleDelayedItemsLayout()

    def _follow_streaming_row(self) -> None:
        """After a relayout: the surface follows its row to its place and size."""
        if self._surface.row >= 0:
            self._place_surface(self._surface.row)

    # --- events ----------------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.EnabledChange):
            self._surface.stop()  # its colours, fonts and words are the old ones (a disabled view greys text)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._delegate.forget_width()
            self._delegate.reset_style()
            self.scheduleDelayedItemsLayout()
        super().changeEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        index = self.indexAt(event.position().toPoint())
        hit = self._delegate.hit_test(index, self.visualRect(index), event.position().toPoint()) if index.isValid() else None
        if hit is None:
            self.viewport().unsetCursor()
        else:
            self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        super().mouseMoveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._delegate.show_focus = False
        super().mousePressEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self._delegate.show_focus:
            self._delegate.show_focus = True
            self.viewport().update()
        if event.matches(QKeySequence.StandardKey.Copy) and self.currentIndex().isValid():
            self._copy(self.conversation_model().item(self.currentIndex().row()).content)
            return
        if (
            event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space)
            and self.currentIndex().isValid()
            and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        ):
            item = self.conversation_model().item(self.currentIndex().row())
            if item.reasoning is not None:  # the current reply's thinking opens or closes
                self.toggle_reasoning(item.id)
                return
            if item.tool is not None:  # a tool call's details
                toggle_tool_row(self.conversation_model(), item.id)
                return
        super().keyPressEvent(event)

    def _on_hit(self, hit: Hit) -> None:
        if hit.kind == "copy":
            self.copy_message(hit.message_id)
        elif hit.kind == "copy_code":
            self._copy(hit.value)
        elif hit.kind == "retry":
            self.retry_requested.emit(hit.message_id)
        elif hit.kind == "regenerate":
            self.regenerate_requested.emit(hit.message_id)
        elif hit.kind == REGENERATE_WITH:
            self.regenerate_with_requested.emit(hit.message_id, hit.value)
        elif hit.kind == ALWAYS:
            self.always_requested.emit(hit.message_id)
        elif hit.kind == "edit":
            self.edit_requested.emit(hit.message_id)
        elif hit.kind in ("version_prev", "version_next"):
            self.version_requested.emit(hit.message_id, -1 if hit.kind == "version_prev" else 1)
        elif hit.kind == "link":
            self.open_link(hit.value)
        elif hit.kind == "details":  # a tool call's row opened or closed
            toggle_tool_row(self.conversation_model(), hit.message_id)
        elif hit.kind == REASONING:  # a reply's thinking opened or closed
            self.toggle_reasoning(hit.message_id)
        elif hit.kind == COPY_REASONING:
            row = self.conversation_model().row_of(hit.message_id)
            thinking = self.conversation_model().item(row).reasoning if row >= 0 else None
            if thinking is not None:
                self._copy(thinking.text)
        elif hit.kind == IMAGE:
            self.open_image(hit.message_id, int(hit.value))
        elif hit.kind in ("source", "open_source"):  # the owner shows the passage or asks before opening the file
            self.source_activated.emit(hit.message_id, hit.kind, int(hit.value))

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.text_copied.emit(text)


__all__ = ["ConversationView", "confirm_with_dialog"]
