"""Plain text drawn after a document's last line, as if it continued the last paragraph.

A streaming reply gets a markdown render of its tail when the new text can change what
markdown shows (ui/conversation/streaming/stream_document.py: renders_as_plain), at most a few times a second; the
characters that arrive in between have to show at once, and a plain paragraph can stream
whole before its next render. Inserting them into the QTextDocument would lay its last
paragraph out again from its first character on every frame (QTextEngine shapes a block
whole). Here those few characters get a QTextLayout of their own that
starts where the document's last line ends, so a frame costs the same whatever the length
of the paragraph. Qt has no "continue this block" layout, hence these small classes. As the
text grows, only its end is laid out again (extended(); words of text that breaks at spaces
are placed one by one, ui/conversation/streaming/word_runs.py), so a frame's cost does not grow with the tail either.

Lines are placed as Qt's document places them: each below the one above, as tall as its
QTextLayout line (the fonts on it make it, their line gap included, as a QTextDocument counts
it), the first on the baseline of the document's last line and as tall as a line holding both
texts. Text with a character the font lacks is laid
out too (a fallback font draws it, and makes its lines taller), but Qt makes every line of a
script run that uses a fallback font that tall, lines laid out before included, so a
streaming reply never shows such text in a tail (ui/conversation/streaming/stream_document.py).

Coordinates are the document's (its top-left is 0, 0).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QTextBoundaryFinder
from PySide6.QtGui import QFont, QFontMetricsF, QPainter, QTextDocument, QTextLayout, QTextOption

from ui.conversation.streaming.word_runs import LATIN_TEXT, WordRuns, primary_font
from ui.conversation.text.document_paint import draw_lines_from_last


@dataclass(frozen=True)
class TailAnchor:
    """Where text after a document goes: read once per document change, not per frame."""

    font: QFont
    metrics: QFontMetricsF
    x: float  # end of the last line
    left: float  # where the following lines start
    right: float
    top: float  # of the last line
    ascent: float  # of the last line, as its fonts make it
    descent: float
    leading: float  # of the last line: its fonts' line gap (Qt counts it in the line's height)
    bottom: float
    before: str  # the document's last character ("" when none): whether a line may break after it

    @classmethod
    def of(cls, doc: QTextDocument) -> TailAnchor:
        """`doc` must be laid out at its text width."""
        font = doc.defaultFont()
        metrics = QFontMetricsF(font)
        block = doc.lastBlock()
        block_layout = block.layout()
        origin = doc.documentLayout().blockBoundingRect(block).topLeft()
        if block_layout is not None and block_layout.lineCount():
            last = block_layout.lineAt(block_layout.lineCount() - 1)
            left, x = origin.x() + last.x(), origin.x() + last.x() + last.naturalTextWidth()
            top, ascent, descent, height = origin.y() + last.y(), last.ascent(), last.descent(), last.height()
            leading = last.leading()
        else:
            left = x = origin.x()
            _raw, ascent, height = primary_font(font)
            top, descent, leading = origin.y(), metrics.descent(), metrics.leading()
        width = doc.textWidth()
        right = max(left + 1.0, width if width > 0 else left + 10_000.0)
        return cls(font, metrics, x, left, right, top, ascent, descent, leading, top + height, block.text()[-1:])


# A line that starts a block of its own in markdown (list item, heading, quote, fence, table).
_BLOCK_START = re.compile(r" {0,3}(?:[-*+] |\d{1,9}[.)] |#{1,6} |>|```|~~~|\|)")


def line_breaks(text: str, in_code: bool) -> str:
    """`text` with each newline as markdown will show it, same length: U+2028 (a line break in
    a QTextLayout, where a newline is a glyph) before a blank line, a new block or inside code;
    a space where the next line only continues the paragraph (a soft break), and where only
    blank text follows it (markdown shows nothing of a text's trailing newlines, and what the
    next text makes of them is not known yet). Showing those as breaks made the text jump up
    a few lines at the next markdown render, or the row shrink when the reply ended."""
    if "\n" not in text:
        return text
    end = len(text.rstrip("\n" if in_code else " \t\n"))  # the newlines from here on are trailing
    if in_code:
        return text[:end].replace("\n", "\u2028") + " " * (len(text) - end)
    out = list(text)
    for i, char in enumerate(text):
        if char == "\n":
            rest = text[i + 1 : i + 12]
            hard = i < end and (rest[0] == "\n" or (i > 0 and text[i - 1] == "\n") or bool(_BLOCK_START.match(rest)))
            out[i] = "\u2028" if hard else " "
    return "".join(out)


def settle_newlines(text: str, before: str) -> tuple[str, str] | None:
    """`text`, which continues a paragraph after its character `before`, as the paragraph's
    document shows it: (what goes in, what is held back). Held back: the trailing blank text
    from its last newline on, which markdown shows as nothing until text follows it (then it
    is a space, a paragraph's end or a new block's start). Each newline before it that is a
    soft break goes in as a space, as Qt shows the newline of a rendered paragraph: between a
    character that is no space or backslash (those make a hard break, or are dropped) and a
    letter or a character outside ASCII, which starts no block. None: a newline that is, or
    may be, more than that, which only a markdown render shows."""
    end = len(text.rstrip(" \t\n"))
    held = text[end:]
    if "\n" not in held:
        end, held = len(text), ""  # spaces go in as they are, as in a line
    body = text[:end]
    if "\n" not in body:
        return body, held
    out: list[str] = []
    start = 0
    newline = body.find("\n")
    while newline >= 0:
        previous = body[newline - 1] if newline else before
        after = body[newline + 1]  # the body ends with no space
        if not previous or previous in " \t\\" or not (after.isalpha() or not (after.isascii() or after.isspace())):
            return None
        out += (body[start:newline], " ")
        start = newline + 1
        newline = body.find("\n", start)
    out.append(body[start:])
    return "".join(out), held


_WRAP = QTextOption()
_WRAP.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
_ORIGIN = QPointF(0, 0)
_LOOK_AHEAD = 80  # characters after the leading spaces that decide where text after a document starts


def next_line_start(anchor: TailAnchor, text: str) -> int:
    """Where `text` starts when the document would put it on the line after its last one (its
    leading spaces stay on that line), or -1 when it continues that line: a line may break
    before it (Unicode line breaking, as Qt breaks lines: after spaces, between CJK
    characters) and its first piece that cannot be broken does not fit after that line's
    text. A piece of a word always continues the word."""
    lead = len(text) - len(text.lstrip(" \t"))
    if lead == len(text) or anchor.x <= anchor.left:
        return -1
    before = anchor.before
    sample = before + text[: lead + _LOOK_AHEAD]
    finder = QTextBoundaryFinder(QTextBoundaryFinder.BoundaryType.Line, sample)
    start = len(before) + lead
    finder.setPosition(start)
    if not finder.isAtBoundary():
        return -1
    end = finder.toNextBoundary()
    piece = text[: (len(sample) if end < 0 else end) - len(before)].rstrip(" \t")
    if anchor.x + anchor.metrics.horizontalAdvance(piece) <= anchor.right:
        return -1
    return lead


class PlainTail:
    """`text` laid out after the document `anchor` was read from; `in_code`: it continues an
    open code fence (every newline is a line break).

    extended() adds text without laying out again what is already there: the lines above the
    last one keep their layout (greedy wrapping never moves them as text is added at the end),
    and only the last line and the new text get a QTextLayout. A long paragraph's frames then
    cost the same as a short one's, so a plain paragraph can stream without markdown renders.
    """

    def __init__(self, anchor: TailAnchor, text: str, *, in_code: bool = False) -> None:
        self.text = text
        self._anchor = anchor
        x, top, shared = anchor.x, anchor.top, True
        start = next_line_start(anchor, text)
        if start >= 0:  # a new word that does not fit after the last line starts the next one
            x, top, shared = anchor.left, anchor.bottom, False
            text = text[start:]
        self._frozen: tuple[tuple[QTextLayout, int], ...] = ()  # (layout, lines of it drawn) above the live one
        self._runs: WordRuns | None = None  # words after the live layout (ui/conversation/streaming/word_runs.py)
        self.first_top = top
        self._lay_out(text, line_breaks(text, in_code), x, top, shared)
        # The box of the tail's first line (shared with the document's last, unless it starts below it).
        self._start = (x, top, self._first_box[1] if self._lines else max(anchor.bottom, top + primary_font(anchor.font)[2]))

    def _lay_out(self, shown: str, laid: str, x: float, top: float, shared: bool) -> None:
        """Lay out `laid` (`shown` with its newlines as drawn) from (x, top): the live layout,
        the one extended() replaces. `shared`: its first line is the document's last line, and
        continues its baseline."""
        anchor = self._anchor
        self._shown, self._laid = shown, laid
        self._layout = layout = QTextLayout(laid, anchor.font)
        layout.setTextOption(_WRAP)
        layout.setCacheEnabled(True)
        self._lines = 0
        layout.beginLayout()
        y = first_bottom = top
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLeadingIncluded(True)  # as in a QTextDocument: height() counts the fonts' line gap
            first = self._lines == 0
            line.setLineWidth(max(1.0, anchor.right - (x if first else anchor.left)))
            if first and shared:
                # On the document's last line's baseline, and that line as tall as Qt makes one
                # that holds both texts: the larger ascent and descent, and a line gap that
                # reaches as far below the larger ascent as the lower of the two texts' gaps
                # (QScriptLine's +=), rounded up to a whole pixel.
                ascent = line.ascent()
                line.setPosition(QPointF(x, top + anchor.ascent - ascent))
                both = max(anchor.ascent, ascent)
                leading = max(anchor.ascent + anchor.leading, ascent + line.leading()) - both
                y = top + max(anchor.bottom - anchor.top, math.ceil(both + max(anchor.descent, line.descent()) + max(0.0, leading)))
            else:
                line.setPosition(QPointF(x if first else anchor.left, y))  # each line below the one above
                y += line.height()
            if first:
                first_bottom = y
            self._lines += 1
        layout.endLayout()
        self._first_box = (top, first_bottom)  # of the live layout's first line
        self._shared = shared
        self.bottom = self._layout_bottom = y if self._lines else top

    def extended(self, piece: str) -> PlainTail:
        """This tail with `piece` (no newline in it, nor in this tail) added at the end.

        A new object: a row's layout may still hold this one. They share what is laid out
        already, which neither changes again. Words of text that breaks at spaces are placed
        one by one (WordRuns); other text lays out the last line again."""
        runs = self.runs_for(piece)
        if runs is not None:
            runs = runs.add(piece)
            if runs is not None:
                grown = self._copy(self.text + piece)
                grown._runs = runs
                grown.bottom = max(self._layout_bottom, runs.bottom)
                return grown
        layout = self._layout
        if not self._lines or self._runs is not None:
            return PlainTail(self._anchor, self.text + piece)
        last = layout.lineAt(self._lines - 1)
        start = last.textStart()
        grown = self._copy(self.text + piece)
        if self._lines > 1:
            grown._frozen = self._frozen + ((layout, self._lines - 1),)
            grown._lay_out(self._shown[start:] + piece, self._laid[start:] + piece, last.x(), last.y(), False)
        else:  # the live layout's first line again: it keeps its top (and baseline, when shared)
            grown._lay_out(self._shown + piece, self._laid + piece, last.x(), self._first_box[0], self._shared)
            if not self._frozen:
                grown._start = (self._start[0], self._start[1], grown._first_box[1])
        return grown

    def runs_for(self, piece: str) -> WordRuns | None:
        """The runs extended() places `piece` with: the tail's own, or new ones after its
        layout; None when it lays the text out instead (other scripts, inside a word the layout
        holds)."""
        if not LATIN_TEXT.fullmatch(piece):
            return None
        runs = self._runs
        if runs is None and self._lines and (self._shown[-1:] == " " or piece[:1] == " "):
            runs = self._start_runs()  # never inside a word the layout holds
        return runs

    @property
    def runs(self) -> WordRuns | None:
        return self._runs

    def words_only_from(self, runs: WordRuns) -> tuple[float, float, float]:
        """(x, top, bottom) for the words of `runs` (this tail's, or runs_for()'s): right of x
        from top on, and everywhere from bottom down, nothing but those words has ink."""
        top = runs.start_top
        if top <= self.first_top + 0.5:  # the tail's first line, shared with the document's last
            top = min(top, self._start[1])
        return (runs.start_x, top, max(self._layout_bottom, self._start[2]))

    def _copy(self, text: str) -> PlainTail:
        copy = object.__new__(PlainTail)
        copy.__dict__.update(self.__dict__)
        copy.text = text
        return copy

    def _start_runs(self) -> WordRuns | None:
        """Runs that start where the live layout's text ends (None: it cannot tell where)."""
        last = self._layout.lineAt(self._lines - 1)
        laid = self._laid.rstrip(" ")
        if len(laid) < last.textStart():
            return None  # the last line holds only spaces
        anchor = self._anchor
        x = last.cursorToX(len(laid))[0] + anchor.metrics.horizontalAdvance(self._laid[len(laid) :])  # type: ignore[index]  # stub: cursorToX -> object
        top, bottom = self._first_box if self._lines == 1 else (last.y(), last.y() + last.height())
        return WordRuns.after(anchor.font, anchor.metrics, anchor.left, anchor.right, x, last.y() + last.ascent(), top, bottom)

    def last_word_box(self, *, closed: bool = False) -> tuple[float, float, float]:
        """(x, top, bottom) where the last word of the text starts: the first place text after
        it can change (greedy wrapping may move that word down as it grows; nothing before
        it moves). `closed`: the text that comes next starts with a space, so the last word
        stays as it is and the place is its end. The first line's box also spans the
        document's last line, which it shares."""
        if self._runs is not None:
            x, top, bottom = self._runs.last_word_box(closed=closed)
            if top <= self.first_top + 0.5:  # the tail's first line
                return (x, min(self._start[1], top), max(self._start[2], bottom))
            return (x, top, bottom)
        shown = self._shown
        if not shown or not self._lines:
            return self._start
        layout = self._layout
        if closed or shown[-1].isspace():
            start = len(shown)
            line = layout.lineAt(layout.lineCount() - 1)
        else:
            # A word that began on a line above this layout's first: that part stays put.
            start = max(shown.rfind(" "), shown.rfind("\n"), shown.rfind("\t")) + 1
            line = layout.lineForTextPosition(start)
        if not line.isValid():
            return self._start
        x = line.cursorToX(start)[0]  # type: ignore[index]  # stub: cursorToX -> object; Qt gives (x, pos)
        if line.lineNumber() == 0 and not self._frozen:  # the tail's first line
            return (x, min(self._start[1], line.y()), max(self._start[2], line.y() + line.height()))
        return (x, line.y(), line.y() + line.height())

    def line_boxes(self) -> list[tuple[float, float, float]]:
        """(top, baseline, bottom) of each line the text is on, from the first down (what Qt's
        layout of the whole paragraph has there). The first is the document's last line, as
        tall as the two texts make it, unless the text starts on the line below it."""
        boxes = []
        for layout, count in self._frozen + ((self._layout, self._lines),):
            for i in range(count):
                line = layout.lineAt(i)
                boxes.append((line.y(), line.y() + line.ascent(), line.y() + line.height()))
        if boxes:
            boxes[0] = (self._start[1], boxes[0][1], self._start[2])
        runs = self._runs
        if runs is not None:
            for _x, baseline, _width, _word, _shaped in runs.words:
                if baseline != runs.start_baseline and baseline != boxes[-1][1]:
                    top, bottom = runs.line_box(baseline)
                    boxes.append((top, baseline, bottom))
        return boxes

    def after_document(self, left: float, top: float) -> bool:
        """Whether an area from (left, top) rightwards and down holds none of the document's ink:
        it starts on or below the document's last line, after that line's text."""
        anchor = self._anchor
        return top >= anchor.top and left >= anchor.x + 2

    def draw(self, painter: QPainter, clip: QRectF) -> None:
        self.draw_area(painter, clip.left(), clip.top(), clip.bottom())

    def draw_area(self, painter: QPainter, left: float, top: float, bottom: float, *, words: bool = True) -> None:
        """Draw the lines (and words, unless not `words`) that reach into the area from `left`
        rightwards, `top` to `bottom`: a frame's area starts where its new text does, and
        drawing a whole line again there would shape all of it."""
        if top < self._layout_bottom:
            draw_lines_from_last(painter, self._frozen + ((self._layout, self._lines),), _ORIGIN, left, top, bottom)
        if self._runs is not None and words:
            self._runs.draw(painter, left, top, bottom)
