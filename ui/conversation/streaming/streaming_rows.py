"""The per-frame path of a streaming reply's row, mixed into MessageDelegate.

While a reply streams, every frame (ui/chat/frame_pacer.py) adds a few
characters to one row. This keeps that cheap: a frame no markdown render is due for takes
stream_frame, which updates the row in place and names the rect of its new words; the others
take grow_streaming_row and changed_area (renders, folds, a row that grows); only what
changed is drawn (paint_stream_frame), and the markdown re-render of the tail is scheduled
here (a timer per delegate). The window's CPU per frame comes out of the engine's cores on a
small machine, so this path avoids everything the general row path does. Most frames of plain words do not come here at all:
the LiveWords widget over the row takes them (ui/conversation/streaming/live_words.py; live_base() gives it the
row to draw on, and the row's own paints leave the text it covers to it, text_covered()).

Uses the delegate's _model, _view, _layouts, docs, layouter, row_width(), show_focus,
paint_region and refresh_requested.
"""

from __future__ import annotations

import dataclasses
import math

from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtGui import QPainter, QPalette, QRegion
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem, QWidget

from ui.conversation.item_model import MessageItem
from ui.conversation.row_layout import RowLayout, same_chrome
from ui.conversation.streaming.stream_document import StreamDocument
from ui.conversation.text.document_paint import paint_stream_text


class StreamingRows:
    """Mixin for MessageDelegate (see the module docstring)."""

    def _init_streaming_rows(self) -> None:
        self._tail_timer = QTimer(self)
        self._tail_timer.setSingleShot(True)
        # Precise: a coarse timer may fire up to 5% early, before the render is due, and each
        # early firing would cost one more full layout of the streaming row.
        self._tail_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._tail_timer.timeout.connect(self._flush_stream_tails)
        self._tail_ids: set[str] = set()
        # (message id, the LiveWords widget) while that widget lies over a streaming row's text
        self.live_cover: tuple[str, QWidget] | None = None

    def _stream_row(self, row: int) -> tuple[MessageItem | None, RowLayout | None, StreamDocument | None]:
        """The row's current item, its cached layout and its streaming document (None: none)."""
        model = self._model
        if model is None or not 0 <= row < model.item_count():
            return None, None, None
        item = model.item(row)
        return item, self._layouts.get(item.id), self.docs.stream(item.id)

    def grow_streaming_row(self, row: int) -> bool:
        """A frame of a streaming reply whose new text only lengthened the plain tail after its
        document, within the height the row already has: update the row's layout in place
        (True). False: the document changed or the row must grow; lay it out in full.

        The full path builds the row's layout again and writes its height, every frame, on the
        cores the engine generates on.
        """
        item, lay, stream = self._stream_row(row)
        if item is None or lay is None or stream is None or lay.width != self.row_width() \
                or item.status != "streaming" or not same_chrome(lay.item, item):
            return False
        if not stream.update(item.content) or stream.doc_edited:
            self._outdate(lay)  # a render or a fold
            return False
        doc_height = max(round(stream.height()), lay.doc_height)
        if self.layouter.stream_room(doc_height) != lay.doc_room:
            self._outdate(lay)  # the row grows
            return False
        lay.item, lay.doc_height, lay.tail = item, doc_height, stream.tail()
        if not self._tail_timer.isActive():
            self._watch_stream_tail(item.id)
        return True

    def stream_frame(self, row: int) -> tuple[int, int, int, int, tuple[int, int, int, int] | None] | None:
        """The common frame of a streaming reply, with as little work as it needs: text no
        markdown render is due for, in the room the row has. Updates the row's
        layout in place and returns the row-relative part to repaint, (x, y, width, height,
        then the same for the lines below when the last word moved down, else None); None: not
        that frame (the caller takes the general path, grow_streaming_row and changed_area).

        A frame's cost is mostly how much Python and Qt code it runs, once, on caches the
        engine has just emptied: here that code runs 3-7 times slower than in a warm loop
        (bench/ui_cpu.py against a micro-benchmark), so every step the common frame skips counts.
        """
        item, lay, stream = self._stream_row(row)
        if item is None or lay is None or stream is None or item.status != "streaming" \
                or lay.width != self.row_width() or not same_chrome(lay.item, item):
            return None
        box = stream.append_plain(item.content)
        if box is None:
            return None
        tail = stream.tail()
        doc_height = max(round(stream.height()), lay.doc_height)
        lay.item, lay.tail = item, tail
        if self.layouter.stream_room(doc_height) != lay.doc_room:
            self._outdate(lay)  # the row grows: the general path lays it out (the text is in already)
            stream.keep_change(box)  # and repaints what changed (changed_area)
            return None
        lay.doc_height = doc_height
        if not self._tail_timer.isActive():
            self._watch_stream_tail(item.id)
        x, top, bottom = box
        left = max(0, lay.doc_left + int(x) - 2)  # antialiasing reaches a pixel or two left
        y = max(0, lay.doc_top + int(top) - 1)
        below = lay.doc_top + math.ceil(bottom) + 1
        more = None
        if lay.doc_top + tail.bottom > below:  # the last word moved down a line
            more = (0, below, lay.width, lay.doc_top + math.ceil(tail.bottom) + 1 - below)
        return (left, y, max(0, lay.width - left), below - y, more)

    @staticmethod
    def _outdate(lay: RowLayout) -> None:
        """Make the row be laid out again, whatever its item, keeping its text's height as the
        least it gets (layout_for), so a markdown render that sets the text tighter than the
        plain text before it does not shrink the row for the next lines to grow it again (two
        relayouts of the whole view, and the text jumping up and down)."""
        lay.item = dataclasses.replace(lay.item)  # a copy: no `lay.item is item` check holds

    def changed_area(self, row: int) -> QRegion | None:
        """Row-relative region of a streaming row whose text changed since the last call.

        New characters change only the end of the last line (from where its last word starts:
        greedy wrapping may move that word down) and any line below it; a markdown re-render
        of the tail changes whole lines from the tail's start. Repainting just that keeps the
        cost of a token independent of how long the reply already is. None when
        unknown (the caller repaints the whole row); empty when nothing changed.
        """
        item, lay, stream = self._stream_row(row)
        if stream is None or lay is None or lay.item is not item or lay.doc is None:
            return None
        area = stream.take_changed_area()
        if area is None:
            return QRegion()  # nothing changed
        x, top, bottom = area
        y = max(0, lay.doc_top + int(top) - 1)
        if x <= 0:
            # Whole lines, down to the end of the room the row keeps for its text: nothing
            # below it changed (a taller text makes the caller lay the row out and repaint it
            # whole), and a region inside the text area gets the quick paint.
            bottom = lay.doc_top + lay.doc_room if lay.doc_room > 0 else lay.height
            return QRegion(0, y, lay.width, max(0, bottom - y))
        left = max(0, lay.doc_left + int(x) - 2)  # antialiasing reaches a pixel or two left
        below = lay.doc_top + math.ceil(bottom) + 1
        region = QRegion(left, y, max(0, lay.width - left), below - y)
        if lay.tail is not None and lay.doc_top + lay.tail.bottom > below:
            region += QRegion(0, below, lay.width, lay.doc_top + math.ceil(lay.tail.bottom) + 1 - below)
        return region

    def paint_stream_frame(self, viewport: QWidget, frame: tuple[int, int, int], exposed: QRect) -> bool:
        """The view's paint of a frame of a streaming row (`frame`: the row and its top-left in
        the viewport): when all of `exposed` lies in the row's text area, draw the text there
        and return True, without the list view's paint (which builds a style option and calls
        paint() for the row). False: paint as usual.

        A frame repaints a word or two; the list view's paint machinery and the full row paint
        would cost more than that.
        """
        if self.show_focus or not viewport.isEnabled():
            return False  # no focus frame to draw; a disabled view draws greyed text
        row, row_x, row_y = frame
        item, lay, stream = self._stream_row(row)
        if item is None or lay is None or stream is None or lay.item is not item or item.status != "streaming":
            return False
        left, top, width, height = exposed.getRect()
        if not self._in_text_area(lay, top - row_y, height):
            return False
        painter = QPainter(viewport)
        try:
            x, y = row_x + lay.doc_left, row_y + lay.doc_top
            paint_stream_text(painter, lay.doc, stream.doc_size(), lay.tail, x, y, self.stream_text_color,
                              (left - x, top - y, width, height))
        finally:
            painter.end()
        return True

    def paint_streaming_text(self, painter: QPainter, option: QStyleOptionViewItem, lay: RowLayout) -> bool:
        """The delegate's paint of a streaming row: when all of the exposed part lies in the text
        area, draw the text there and nothing else (True). False: paint the row in full.

        The full paint works out colours and fonts and checks every part of the row (header,
        notices, footer, actions), work a token never needs.
        """
        exposed = self.paint_region
        if exposed is None or (self.show_focus and option.state & QStyle.StateFlag.State_HasFocus):
            return False  # a whole-row paint, or the focus frame along the row's edges
        row_x, row_y = option.rect.x(), option.rect.y()
        left, top, width, height = exposed.getRect()
        if not self._in_text_area(lay, top - row_y, height):
            return False
        if self.text_covered(lay, option.rect):
            return True  # the LiveWords widget over it draws this text
        size = lay.doc.size()
        x, y = row_x + lay.doc_left, row_y + lay.doc_top
        painter.save()  # the list view's painter goes on to other rows
        try:
            paint_stream_text(painter, lay.doc, (size.width(), size.height()), lay.tail, x, y,
                              option.palette.color(QPalette.ColorRole.Text), (left - x, top - y, width, height))
        finally:
            painter.restore()
        return True

    def text_covered(self, lay: RowLayout, row_rect: QRect) -> bool:
        """Whether the row's text area (as far as the viewport shows it) lies under the LiveWords
        widget, which draws it (ui/conversation/streaming/live_words.py): the row's own paint leaves it out."""
        cover = self.live_cover
        if cover is None or cover[0] != lay.item.id or lay.doc is None:
            return False
        text = QRect(row_rect.x() + lay.doc_left, row_rect.y() + lay.doc_top, math.ceil(lay.doc.textWidth()) + 2,
                     lay.doc_room)
        return cover[1].geometry().contains(text.intersected(self._view.viewport().rect()))

    @staticmethod
    def _in_text_area(lay: RowLayout, top: int, height: int) -> bool:
        """Whether `height` pixels from `top` (row coordinates) lie in the row's text area,
        drawn unfaded."""
        if lay.doc is None or not lay.item.seen_by_model:
            return False
        return top >= lay.doc_top and top + height <= lay.doc_top + lay.doc_room

    def live_base(self, row: int) -> tuple[MessageItem, RowLayout, StreamDocument] | None:
        """(item, layout, streaming document) of a streaming row shown unfaded with a document,
        laid out for its current text (now, if it was not): what ui/conversation/streaming/live_words.py draws on
        from. None otherwise."""
        model = self._model
        if model is None or not 0 <= row < model.item_count():
            return None
        item = model.item(row)
        if item.status != "streaming" or not item.seen_by_model:
            return None
        lay = self.layout_for(item)  # the cached one when it is current
        stream = self.docs.stream(item.id)
        if lay.doc is None or stream is None or len(stream.text) != len(item.content):
            return None
        return item, lay, stream

    def _watch_stream_tail(self, message_id: str) -> None:
        due = self.docs.pending_stream_tail(message_id)
        if due is not None:
            self.watch_stream_tail_in(message_id, due)

    def watch_stream_tail_in(self, message_id: str, due: float) -> None:
        """Ask for the row's refresh (its markdown render) in `due` seconds, unless one is
        asked for already."""
        self._tail_ids.add(message_id)
        if not self._tail_timer.isActive():
            self._tail_timer.start(max(1, math.ceil(due * 1000)))

    def _flush_stream_tails(self) -> None:
        # The view's refresh goes through grow_streaming_row(): the render happens there, and a
        # refresh with nothing due changes nothing (and re-arms this timer).
        ids, self._tail_ids = self._tail_ids, set()
        for message_id in ids:
            self.refresh_requested.emit(message_id)
