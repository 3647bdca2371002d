"""One streaming reply's text, behind the one contract the conversation view and its delegate use.

append() takes the reply's text as it grows and says what to repaint (Damage), paint() draws
it, height() says how tall it is (it never shrinks while the reply streams), settle() lays all
of it out in the document (a row's full layout). Inside: a StreamDocument (markdown renders of
the tail, plain text after them) and the fast path: plain words placed one by one after the
document's plain tail (WordRuns.place) without touching the document, until a frame that
needs more (a newline, markdown, a render due, a fold) brings the document up to date.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import NamedTuple

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFont, QPainter

from ui.conversation.streaming.plain_tail import PlainTail
from ui.conversation.streaming.stream_document import MAX_PENDING_CHARS, StreamDocument
from ui.conversation.streaming.word_runs import WordRuns
from ui.conversation.text.document_paint import LastParagraph, draw_last_paragraph_lines, draw_with_layout
from ui.conversation.text.markdown_render import Rendered
from ui.conversation.text.safe_document import SafeTextDocument

# Latin, Greek or Cyrillic words and spaces without a markdown character: word_runs.LATIN_TEXT
# less stream_document's markdown characters \ ` * _ [ ] < > & ~ | (a test checks it is
# exactly that), text no markdown render needs to see.
PLAIN_WORDS = re.compile(
    "[\u0020-\u0025\u0027-\u0029\u002b-\u003b\u003d\u003f-\u005a\u005e\u0061-\u007b\u007d\u007f-\u052f\u2010-\u2027\u2030-\u205e]+"
)
_LINE_START_CHARS = 16  # a line's first characters decide whether it is a list item, heading or rule
# plain_tail.line_breaks reads this many characters after a newline to tell what it is.
_AFTER_NEWLINE = 12
_NOWHERE = (math.inf, math.inf, math.inf)
_FAR = 1 << 20  # "to the right edge" or "to the bottom": the caller clips to the reply's area

Rect = tuple[int, int, int, int]  # x, y, width, height in the reply's coordinates
Area = tuple[float, float, float, float]  # the same, as a painter's clip gives it (fractions of a pixel)


class Damage(NamedTuple):
    """What one append() changed: `rects` to repaint (they may reach past the reply's area,
    which the caller clips to), the reply's `height` now, and `due`: seconds until a markdown
    render of the tail is due (call append() again with the same text then), None when none is.
    A named tuple: one is made every frame, and a frozen dataclass costs several times more."""

    rects: tuple[Rect, ...]
    height: float
    due: float | None


def _rects(left_x: float, y: int, line_bottom: float, bottom: float) -> tuple[Rect, ...]:
    """From `left_x` to the right edge on the line from `y` to `line_bottom`, and every line below
    it down to `bottom` (antialiasing reaches a pixel or two left of a glyph)."""
    left = max(0, int(left_x) - 2)
    y = max(0, y)
    below = math.ceil(line_bottom) + 1
    if left <= 0 and bottom >= _FAR:
        return ((0, y, _FAR, _FAR),)
    rects: tuple[Rect, ...] = ((left, y, _FAR, below - y),)
    if bottom > below:
        rects += ((0, below, _FAR, math.ceil(bottom) + 1 - below),)
    return rects


class StreamingReply:
    """The text of one streaming message (`text`: all of it so far), laid out at a text width."""

    def __init__(
        self, doc: SafeTextDocument, *, dark: bool, clock: Callable[[], float] = time.monotonic, on_render: Callable[[], None] | None = None
    ) -> None:
        self._stream = StreamDocument(doc, dark=dark, clock=clock, on_render=on_render)
        self._shapes = LastParagraph()
        self.text = ""
        self._height = 0.0
        self.quick_frames = 0  # public counter: the append() calls the fast path took (words placed, document untouched)
        self._forget_words()

    # --- what the row needs to know ------------------------------------------------------

    @property
    def document(self) -> SafeTextDocument:
        """The document the reply's markdown is rendered into (its anchors are the row's links)."""
        return self._stream.doc

    @property
    def rendered(self) -> Rendered:
        return self._stream.rendered

    @property
    def stream(self) -> StreamDocument:
        """The document behind the reply: its rendered part, the pending text after it and that text's plain tail."""
        return self._stream

    def height(self) -> float:
        return self._height

    def due_in(self) -> float | None:
        """Seconds until a markdown render of the tail is due (append() the same text then)."""
        return self._stream.due_in()

    def words_font(self) -> QFont | None:
        """The font the fast path's words are drawn in (None while it has none)."""
        return None if self._runs is None else self._runs.font

    def set_width(self, width: float) -> None:
        """Lay the reply out at text width `width` (settled first)."""
        if self._stream.doc.textWidth() != width:
            self._settle_words()
            self._stream.set_text_width(width)
            self._height = self._stream.height()

    # --- growing ---------------------------------------------------------------------------

    def settle(self, content: str) -> bool:
        """Show `content` with all of it laid out in the document and its tail (a row's full
        layout asks this). False when it does not extend the text (the caller starts over)."""
        if not self._stream.update(content):
            return False
        self.text = content
        self._forget_words()
        self._height = max(self._height, self._stream.height())
        return True

    def append(self, content: str) -> Damage | None:
        """Show `content` (the text so far, which extends what is shown; the same text again
        renders the tail if a render is due). None when it does not extend it."""
        piece = content[len(self.text) :]
        rects = self._place_words(content, piece) if piece else None
        if rects is not None:
            return Damage(rects, self._height, self._due)
        stream = self._stream
        if not stream.update(content):
            return None
        self.text = content
        self._forget_words()
        self._height = max(self._height, stream.height())
        area = stream.take_changed_area()
        if area is None:
            rects = ()
        elif area[0] <= 0:
            rects = _rects(0, int(area[1]) - 1, area[2], _FAR)  # whole lines (a render or a fold), to the bottom
        else:
            rects = _rects(area[0], int(area[1]) - 1, area[2], stream.height())
        return Damage(rects, self._height, stream.due_in())

    def _forget_words(self) -> None:
        """The document changed (or may have): the fast path starts again from its tail."""
        self._runs: WordRuns | None = None  # the WordRuns whose font, lines and rules place the words
        self._tail: PlainTail | None = None
        self._words: list = []
        self._cursor = self._baseline = 0.0
        self._open = False
        self._words_only = _NOWHERE  # see PlainTail.words_only_from
        self._plain_line = False  # the current line renders as plain, whatever plain words follow
        self._pending_start = 0
        self._due: float | None = None

    def _settle_words(self) -> None:
        if len(self._stream.text) != len(self.text):
            self.settle(self.text)

    def _place_words(self, content: str, piece: str) -> tuple[Rect, ...] | None:
        """The fast path: `piece` is plain words no markdown render is due for, placed after
        the words so far without touching the document. Returns what to repaint; None when the
        frame is not one it takes. Few Qt calls: each costs microseconds on the caches the
        engine empties."""
        if PLAIN_WORDS.fullmatch(piece) is None:
            return None
        stream = self._stream
        runs = self._runs
        if runs is None:
            tail = stream.tail()
            if tail is None:
                return None  # nothing pending yet: the document's way
            runs = tail.runs_for(piece)
            if runs is None:
                return None  # other scripts, or inside a word the tail's layout holds: the document's way
            self._tail, self._runs, self._words = tail, runs, list(runs.words)
            self._cursor, self._baseline, self._open = runs.cursor, runs.baseline, runs.open_word
            self._words_only = tail.words_only_from(runs)
            self._pending_start = stream.pending_start
        if len(content) - self._pending_start > MAX_PENDING_CHARS:
            return None  # the pending text is folded into the document
        newline = content.rfind("\n")
        if newline >= self._pending_start and len(content) - newline <= _AFTER_NEWLINE:
            return None  # the text after a pending newline decides what it shows (plain_tail.line_breaks)
        wait = None
        if not self._plain_line:
            wait = stream.render_wait(content)
            if wait is not None and wait <= 0:
                return None  # a markdown render is due
            # Plain words added to a line that renders as plain and is longer than any list
            # marker, heading or rule start can be never change that (renders_as_plain).
            self._plain_line = wait is None and len(content) - content.rfind("\n") > _LINE_START_CHARS
        words = self._words[:]  # kept as they were if the new ones do not fit
        if self._open and words and piece[0] != " ":
            x0, first_baseline = words[-1][0], words[-1][1]  # the last word grows, and may move down
        else:
            x0, first_baseline = self._cursor, self._baseline
        placed = runs.place(words, piece, self._cursor, self._baseline, self._open)
        if placed is None:
            return None  # a word longer than a line, or one a fallback font draws
        self._words, self.text = words, content
        self._cursor, self._baseline, self._open = placed
        self._due = wait
        self.quick_frames += 1
        line_box = runs.line_box
        bottom = line_box(placed[1])[1]
        self._height = max(self._height, bottom)
        # The runs' first line is the one the tail's first line shares with the document's
        # last, which may be taller (PlainTail.words_only_from); below it, the area starts
        # where the text above has no ink left, so only words are drawn again.
        _x, words_top, words_bottom = self._words_only
        top, line_bottom = line_box(first_baseline)
        if top < words_bottom - 0.5:
            # Not a pixel above: the line above it is the document's, and its descenders reach
            # its last row of pixels (only words are drawn again here).
            y, line_bottom = math.ceil(min(top, words_top)), max(line_bottom, words_bottom)
        else:
            y = max(int(top) - 1, math.ceil(words_bottom))
        return _rects(x0, y, line_bottom, bottom)

    # --- drawing ---------------------------------------------------------------------------

    def paint(self, painter: QPainter, clip: Area, color: QColor, *, ready: bool = False) -> None:
        """Draw the part of the reply inside `clip`, in the painter's coordinates (the reply's
        top-left at 0, 0), text without a colour of its own in `color`. `ready`: the painter
        already has `color` as its pen and words_font() as its font (a surface kept for this
        reply), which saves a frame two Qt calls."""
        stream = self._stream
        if self._runs is None:
            self._paint_text(painter, stream.tail(), color, clip)
            return
        left, top, _width, height = clip
        x, words_top, words_bottom = self._words_only
        if top < words_bottom and (top < words_top or left < x - 1):
            self._paint_text(painter, self._tail, color, clip, words=False)
            ready = False
        elif not ready:
            painter.setPen(color)
        self._runs.draw_words(painter, self._words, left, top, top + height, set_font=not ready)

    def _paint_text(self, painter: QPainter, tail: PlainTail | None, color: QColor, clip: Area, *, words: bool = True) -> None:
        """The document, then its plain `tail`, inside `clip`. No save() and restore(), and plain
        numbers rather than Qt geometry objects where it can: each Qt call costs microseconds on
        the caches the engine keeps emptying, and a frame draws only a word or two. Not `words`:
        the tail's word runs are left out (the fast path's words are drawn instead)."""
        painter.setPen(color)
        doc = self._stream.doc
        left, top, width, height = clip
        right, bottom = left + width, top + height
        doc_width, doc_height = self._stream.doc_size()
        doc_right, doc_bottom = min(right, doc_width), min(bottom, doc_height)
        past_document = tail is not None and tail.after_document(left, top)
        if not past_document and left < doc_right and top < doc_bottom:
            doc_clip = QRectF(max(left, 0.0), max(top, 0.0), doc_right - max(left, 0.0), doc_bottom - max(top, 0.0))
            painter.setClipRect(doc_clip)
            if not draw_last_paragraph_lines(painter, doc, doc_clip, self._shapes.of(doc)):
                draw_with_layout(painter, doc, color, doc_clip)
            painter.setClipping(False)  # the tail is drawn below the document too
        if tail is not None and width > 0 and height > 0 and tail.first_top <= bottom and top <= tail.bottom:
            tail.draw_area(painter, left, top, bottom, words=words)
