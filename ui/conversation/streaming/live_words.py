"""The newest words of a streaming reply, drawn by a small widget of their own over its row.

Most frames of a streaming reply add a word or two of plain text after the row's plain tail
(ui/conversation/streaming/plain_tail.py, ui/conversation/streaming/word_runs.py). This widget places those words itself and draws
only them, rather than taking the frame through the row's streaming document, its row layout
and the list view's paint.

LiveWords lies over the streaming row's text area: opaque (the list view never paints under
it) and transparent for the mouse (the view keeps hover, links and clicks). It takes a frame
(add()) when the new text is plain words that need no markdown render yet, fit on their lines
and in the row's room: it places them with the row's own WordRuns rules (WordRuns.place) and
repaints their rect. The row's StreamDocument and layout stay as they were, "the base",
until a frame it does not take (a newline, markdown, a render due, a word longer than a line,
a row that must grow); the view's general path then brings them up to date with the whole
text, which puts the same words in the same places, and follow() takes that as the new base.
Its paint draws the base (document and tail, without the tail's words) where a rect needs it,
then its words. Coordinates are the row's document's (the widget's top-left is its origin).
"""

from __future__ import annotations

import math
import re

from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QRegion
from PySide6.QtWidgets import QAbstractItemView, QWidget

from ui.conversation.streaming.stream_document import MAX_PENDING_CHARS
from ui.conversation.text.document_paint import paint_stream_text

# Latin, Greek or Cyrillic words and spaces without a markdown character: ui/conversation/streaming/word_runs.py's
# LATIN_TEXT less ui/conversation/streaming/stream_document.py's markdown characters \ ` * _ [ ] < > & ~ | (a test
# checks it is exactly that), text no markdown render needs to see.
_PLAIN_WORDS = re.compile("[\u0020-\u0025\u0027-\u0029\u002B-\u003B\u003D\u003F-\u005A\u005E"
                          "\u0061-\u007B\u007D\u007F-\u052F\u2010-\u2027\u2030-\u205E]+")
_LINE_START_CHARS = 16  # a line's first characters decide whether it is a list item, heading or rule
_NOWHERE = (math.inf, math.inf, math.inf)


class LiveWords(QWidget):
    """Over `view`'s viewport (a ConversationView whose rows `delegate` draws, a
    MessageDelegate); hidden until follow() finds a streaming row."""

    def __init__(self, view: QAbstractItemView, delegate) -> None:
        super().__init__(view.viewport())
        # Opaque (the list view never paints under it), filled by Qt itself, and a painter on it
        # starts with the text's colour and font (WindowText, setFont): a frame's paint makes
        # no call it can avoid, each costing microseconds on the caches the engine empties.
        self.setAutoFillBackground(True)
        # Grown (the row grows a few lines at a time): only the new part is painted.
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAccessibleName("Reply being written")
        self.hide()
        self._view = view
        self._delegate = delegate
        self._row = -1
        self._message_id = ""
        self._model = None
        self._lay = None
        self._stream = None
        self._tail = None
        self._base_len = 0  # len(stream.text) when this took the base
        self._shown_len = 0  # of the row's content, shown by the base and these words
        self._pending_start = 0
        self._spec = None  # the WordRuns whose font, lines and rules place the words
        self._words: list = []
        self._cursor = self._baseline = 0.0
        self._open = False
        self._words_only = _NOWHERE  # see PlainTail.words_only_from
        self._room = 0  # the row's height for its text
        self._doc_revision = -1
        self._plain_line = False  # the current line renders as plain, whatever plain words follow
        self._color = QColor()
        self.frames = 0  # frames taken (tests and benches read it)

    @property
    def row(self) -> int:
        """The row it is over, or -1."""
        return self._row

    def stop(self) -> None:
        """Leave the row to the list view (it paints what was under this)."""
        self._row, self._lay, self._stream, self._tail, self._spec = -1, None, None, None, None
        self._words = []
        self._delegate.live_cover = None
        if not self.isHidden():
            self.hide()

    def relaid(self) -> None:
        """The list laid its rows out again (the row grew, rows above it changed): follow the
        row to its place and size. What the widget shows stays right unless the row's text
        changed in a way it has not drawn (laying the row out can render its tail)."""
        if self._row < 0:
            return
        doc, revision, shown = self._lay.doc, self._doc_revision, self._shown_len
        self.follow(self._model.row_of(self._message_id), QRegion())
        if self._row >= 0 and (self._lay.doc is not doc or doc.revision() != revision
                               or len(self._stream.text) > shown):
            self.update()

    def follow(self, row: int, region: QRegion | QRect | None = None) -> bool:
        """Take `row`'s current state as the base, after a frame the view took the general way
        (or stop when the row is not a streaming one laid out for its text). `region` (viewport
        coordinates; None: the whole row) changed: True when it lies within this widget, which
        repaints it; False when the viewport must."""
        base = self._delegate.live_base(row)
        view = self._view
        if base is None or not view.isEnabled():
            self.stop()
            return False
        item, lay, stream = base
        rect = view.visualRect(view.model().index(row, 0))
        if not rect.isValid():
            self.stop()
            return False
        self._take_base(row, item.id, lay, stream)
        x, y = rect.x() + lay.doc_left, rect.y() + lay.doc_top
        right = lay.card.right() if lay.card.isValid() else lay.width
        geometry = QRect(x, y, max(1, right - lay.doc_left), max(1, lay.doc_room))
        if self.isHidden():
            viewport = view.viewport()
            self._color = self._delegate.stream_text_color
            palette = self.palette()
            palette.setColor(QPalette.ColorRole.Window, viewport.palette().color(viewport.backgroundRole()))
            palette.setColor(QPalette.ColorRole.WindowText, self._color)
            self.setPalette(palette)
            self.setGeometry(geometry)
            self.show()  # paints all of it
            self._delegate.live_cover = (item.id, self)  # the row's own paint leaves its text to this
            return region is not None and self._spans(QRegion(region).boundingRect())
        if self.geometry() != geometry:
            self.setGeometry(geometry)  # paints what it adds (WA_StaticContents), or all when it moved
        if region is None:
            self.update()
            return False
        region = QRegion(region)
        self.update(region.translated(-x, -y))
        return self._spans(region.boundingRect())

    def _spans(self, rect: QRect) -> bool:
        """Whether text changes in `rect` (viewport coordinates) are all this widget's to draw:
        it lies within this widget's lines. Left and right of it lie the row's margins, where
        text has no ink (the general path's rects reach the row's edges)."""
        geometry = self.geometry()
        return geometry.top() <= rect.top() and rect.bottom() <= geometry.bottom()

    def _take_base(self, row: int, message_id: str, lay, stream) -> None:
        self._row, self._message_id, self._lay, self._stream = row, message_id, lay, stream
        self._model = self._view.model()
        self._base_len = self._shown_len = len(stream.text)
        self._doc_revision = lay.doc.revision()
        self._room, self._plain_line = lay.doc_room, False
        self._pending_start = stream.pending_start
        self._tail = tail = stream.tail()
        self._take_runs(None if tail is None else tail.runs)

    def _take_runs(self, runs) -> None:
        self._spec = runs
        if runs is None:
            self._words, self._words_only = [], _NOWHERE
            return
        self._words = list(runs.words)
        self._cursor, self._baseline, self._open = runs.cursor, runs.baseline, runs.open_word
        if self.font() != runs.font:
            self.setFont(runs.font)  # once a reply: the painter starts with it
        self._words_only = self._tail.words_only_from(runs)

    def add(self, row: int) -> bool:
        """Show the row's new text if it is a frame this takes (see the module docstring): True
        when it did. Few Qt calls: each costs microseconds on the caches the engine empties."""
        if row != self._row:
            return False
        stream = self._stream
        if len(stream.text) != self._base_len:
            return False  # something brought the base up to date: follow() takes it again
        content = self._model.item(row).content
        piece = content[self._shown_len:]
        if not piece or _PLAIN_WORDS.fullmatch(piece) is None \
                or len(content) - self._pending_start > MAX_PENDING_CHARS:
            return False
        wait = None
        if not self._plain_line:
            wait = stream.render_wait(content)
            if wait is not None and wait <= 0:
                return False  # a markdown render is due
            # Plain words added to a line that renders as plain and is longer than any list
            # marker, heading or rule start can be never change that (renders_as_plain).
            self._plain_line = wait is None and len(content) - content.rfind("\n") > _LINE_START_CHARS
        spec = self._spec
        if spec is None:
            spec = self._tail.runs_for(piece) if self._tail is not None else None
            if spec is None:
                return False
            self._take_runs(spec)
        words = self._words[:]  # kept as they were if the new ones do not fit
        if self._open and words and piece[0] != " ":
            x0, first_baseline = words[-1][0], words[-1][1]  # the last word grows, and may move down
        else:
            x0, first_baseline = self._cursor, self._baseline
        placed = spec.place(words, piece, self._cursor, self._baseline, self._open)
        if placed is None:
            return False  # a word longer than a line, or one a fallback font draws: laid out the general way
        line_box = spec.line_box
        bottom = line_box(placed[1])[1]
        if round(bottom) > self._room:
            return False  # the row must grow (as StreamingRows.stream_frame decides it)
        self._words, self._shown_len = words, len(content)
        self._cursor, self._baseline, self._open = placed
        self.frames += 1
        if wait is not None:  # a render will be due: the delegate's timer asks for it
            self._delegate.watch_stream_tail_in(self._message_id, wait)
        # Repaint from where the first changed word started (antialiasing reaches a pixel or
        # two left) to the end of its line, and every line below it down to the new last one.
        # The runs' first line is the one the tail's first line shares with the document's
        # last, which may be taller (PlainTail.words_only_from); below it, the rect starts
        # where the text above has no ink left, so only words are drawn again.
        _x, words_top, words_bottom = self._words_only
        top, line_bottom = line_box(first_baseline)
        if top < words_bottom - 0.5:
            # Not a pixel above: the line above it is the base's, and its descenders reach its
            # last row of pixels (only words are drawn again here).
            y, line_bottom = math.ceil(min(top, words_top)), max(line_bottom, words_bottom)
        else:
            y = max(int(top) - 1, math.ceil(words_bottom))
        left, y = max(0, int(x0) - 2), max(0, y)
        below = math.ceil(line_bottom) + 1
        width = self.width()
        self.update(left, y, width - left, below - y)
        if bottom > below:
            self.update(0, below, width, math.ceil(bottom) + 1 - below)
        return True

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)  # on the background Qt filled in, with the text's pen and font
        stream = self._stream
        if stream is not None:
            left, top, width, height = event.rect().getRect()
            if len(stream.text) != self._base_len:
                self._paint_caught_up(painter, (left, top, width, height))
            else:
                x, words_top, words_bottom = self._words_only
                drawn_words = self._words
                if top < words_bottom and (top < words_top or left < x - 1):
                    paint_stream_text(painter, self._lay.doc, stream.doc_size(), self._tail, 0, 0, self._color,
                                      (left, top, width, height), words=False)
                    painter.setFont(self.font())
                if drawn_words:
                    self._spec.draw_words(painter, drawn_words, left, top, top + height, set_font=False)
        painter.end()

    def _paint_caught_up(self, painter: QPainter, clip: tuple[int, int, int, int]) -> None:
        """Something brought the base up to date with the row's text (a hover or a prefetch
        laid the row out): draw the row's text as it is now, and follow it right after."""
        model, row = self._model, self._row
        if 0 <= row < model.item_count():
            lay = self._delegate.layout_for(model.item(row))
            if lay.doc is not None and lay.doc is self._lay.doc:
                paint_stream_text(painter, lay.doc, self._stream.doc_size(), lay.tail, 0, 0, self._color, clip)
        QTimer.singleShot(0, self._follow_again)

    def _follow_again(self) -> None:
        if self._row >= 0:
            self.follow(self._row)
