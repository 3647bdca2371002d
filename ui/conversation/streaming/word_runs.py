"""Words placed one at a time after a laid-out text: the cheap end of a streaming PlainTail.

A token adds a word or two to a streaming reply. Laying out the tail's last line again with a
QTextLayout costs that whole line's shaping every frame, and drawing it draws the whole line
again. Here each new word is shaped once
(a QStaticText, kept per font and word), placed after the previous one, and moved to the
next line when it does not fit, as QTextLayout wraps text that breaks only at spaces; a
frame then draws only the words it brought, without shaping them again. Only for scripts that
break at spaces (Latin, Greek, Cyrillic: LATIN_TEXT) and words whose every character the
font itself has: a line with a character Qt takes from a fallback font gets that font's
ascent, descent and line gap (a CJK fallback makes it taller), which only a QTextLayout knows. Anything
else, a tab, or a word longer than a line, and the caller lays the text out with a
QTextLayout instead.

Immutable: a row's layout may still hold the previous runs while the next ones are built.
Coordinates are the document's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QPainter, QRawFont, QStaticText, QTextLayout, QTransform

from ui.conversation.text.document_paint import visible_from_last

# Text that wraps only at spaces: Latin, Greek, Cyrillic and general punctuation, no tabs
# or newlines. (CJK, Thai and others may break between any two characters.)
LATIN_TEXT = re.compile(r"[\u0020-\u052F\u2010-\u2027\u2030-\u205E]*")
_TOKENS = re.compile(r" +|[^ ]+")
# Words already shaped, per font, with their width and whether the font itself has all their
# characters: replies repeat their words, and shaping one (to measure it, and again on every
# drawText of it) is the costly part of drawing it. QStaticText keeps the shaped glyphs; drawing
# it at (x, baseline - ascent) gives the pixels drawText gives at (x, baseline).
_SHAPED: dict[tuple[str, str], tuple[QStaticText, float, bool]] = {}
_ADVANCES: dict[tuple[str, str], float] = {}  # runs of spaces
_MAX_CACHED = 4096  # words (a few hundred bytes each); a reply has a few hundred distinct ones
# Per font key: the font Qt draws its text with first (QRawFont), and (ascent, height) of a
# QTextLayout line of that font alone; and per (font key, character) whether that font has it.
_PRIMARY: dict[str, tuple[QRawFont, float, float]] = {}
_HAS: dict[tuple[str, str], bool] = {}


def primary_font(font: QFont) -> tuple[QRawFont, float, float]:
    """(the font `font`'s text is drawn with unless a character needs a fallback, ascent and
    height of a QTextLayout line that holds only that font's glyphs, line gap included as a
    QTextDocument counts it). Qt rounds a line's height up to a whole pixel, so the height is a
    laid-out line's, not the metrics'."""
    key = font.key()
    primary = _PRIMARY.get(key)
    if primary is None:
        layout = QTextLayout("x", font)
        layout.beginLayout()
        line = layout.createLine()
        line.setLeadingIncluded(True)  # as in a QTextDocument: the height counts the line gap
        line.setLineWidth(1_000.0)
        layout.endLayout()
        if len(_PRIMARY) >= 64:
            _PRIMARY.clear()
        primary = _PRIMARY[key] = (QRawFont.fromFont(font), line.ascent(), line.height())
    return primary


def in_primary_font(font: QFont, text: str) -> bool:
    """Whether primary_font(font) has every character of `text` that is drawn (ASCII, which
    every text font has, is not looked up; nor are control characters and line separators):
    Qt draws none of it with a fallback font."""
    if text.isascii():
        return True
    key = font.key()
    for char in set(text):
        if char <= "\x7f" or char in "\u2028\u2029\x85":
            continue
        has = _HAS.get((key, char))
        if has is None:
            if len(_HAS) >= _MAX_CACHED:
                _HAS.clear()
            has = _HAS[(key, char)] = primary_font(font)[0].supportsCharacter(ord(char))
        if not has:
            return False
    return True


# Letters of Han, hiragana, katakana and Hangul (no marks, no punctuation, no symbols): each is a
# script of its own, so Qt ends their script run at the next Latin letter.
CJK_LETTER = re.compile("[\u3041-\u3096\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]")
# CJK and fullwidth punctuation of no script (Unicode's Common), and the line separator: like ASCII
# spaces, digits and punctuation, they join the script run before them.
CJK_COMMON = re.compile("[\u2028\u3000-\u3003\u3008-\u3011\u3014-\u301f\u30fb\u30fc\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
_ASCII_LETTER = re.compile("[A-Za-z]")


def past_fallback_run(font: QFont, paragraph: str) -> bool:
    """Whether text added after `paragraph` (in `font`, no character it lacks) joins a script
    run that holds only `font`'s glyphs. Qt sizes a line by the script runs on it: a run with a
    fallback font's glyph makes every line it is on as tall as that font's (ascent, descent,
    line gap), and a character of no script (space, digit, punctuation) joins the run before it.
    So: there is no character the font lacks, or an ASCII letter (a Latin run of its own) comes
    after the last one, which is a CJK letter, or CJK punctuation after one (with nothing but
    such punctuation and ASCII non-letters between). Any other character the font lacks (emoji,
    symbols, fullwidth or rare Latin, punctuation after Latin text) may be in the run the
    paragraph ends with, lines above included."""
    if paragraph.isascii():
        return True
    letter = False
    for i in range(len(paragraph) - 1, -1, -1):
        char = paragraph[i]
        if char <= "\x7f":
            letter = letter or bool(_ASCII_LETTER.match(char))
        elif not in_primary_font(font, char):
            if not letter or CJK_LETTER.match(char):
                return letter
            if not CJK_COMMON.match(char):
                return False
            for before in reversed(paragraph[:i]):  # the run punctuation belongs to: the letter before it
                if CJK_LETTER.match(before):
                    return True
                if _ASCII_LETTER.match(before) or not (before <= "\x7f" or CJK_COMMON.match(before)):
                    return False
            return False  # no letter before it: it joins the Latin run after it
    return True


@dataclass(frozen=True)
class WordRuns:
    """Words after a text, each (x, baseline, width, word, its shaped QStaticText); `cursor` is
    where the next character goes, `open_word` whether the last word may still grow (no space
    after it).

    The first line is the one the text before the runs ends on, with that text's box (its
    fonts may make it taller); the lines the words wrap to hold only these words, in the
    font alone (line_box())."""

    font: QFont
    metrics: QFontMetricsF
    font_key: str
    left: float  # where a wrapped line starts
    right: float
    ascent: float  # of a line of the font alone, as a QTextLayout has it
    text_ascent: float  # the font's: a QStaticText is drawn from its top, ascent above the baseline
    line_height: float  # of a line of the font alone (Qt rounds it up)
    words: tuple[tuple[float, float, float, str, QStaticText], ...]
    cursor: float
    baseline: float  # of the line the cursor is on
    open_word: bool
    start_x: float  # where the runs began, on the line of start_baseline
    start_baseline: float
    start_top: float  # the box of the line the runs began on
    start_bottom: float

    @classmethod
    def after(
        cls, font: QFont, metrics: QFontMetricsF, left: float, right: float, x: float, baseline: float, line_top: float, line_bottom: float
    ) -> WordRuns:
        """Runs that start at (x, baseline), after text that ends in a space, on a line from
        `line_top` to `line_bottom`."""
        _raw, ascent, height = primary_font(font)
        return cls(
            font,
            metrics,
            font.key(),
            left,
            right,
            ascent,
            metrics.ascent(),
            height,
            (),
            x,
            baseline,
            False,
            x,
            baseline,
            line_top,
            line_bottom,
        )

    def line_box(self, baseline: float) -> tuple[float, float]:
        """(top, bottom) of the line of `baseline` (one of these runs' lines)."""
        if baseline == self.start_baseline:
            return (self.start_top, self.start_bottom)
        top = baseline - self.ascent
        return (top, top + self.line_height)

    def add(self, piece: str) -> WordRuns | None:
        """These runs with `piece` (LATIN_TEXT) after them; None when a word is longer than a
        line or has a character the font lacks."""
        words = list(self.words)
        placed = self.place(words, piece, self.cursor, self.baseline, self.open_word)
        if placed is None:
            return None
        return WordRuns(
            self.font,
            self.metrics,
            self.font_key,
            self.left,
            self.right,
            self.ascent,
            self.text_ascent,
            self.line_height,
            tuple(words),
            *placed,
            self.start_x,
            self.start_baseline,
            self.start_top,
            self.start_bottom,
        )

    def place(self, words: list, piece: str, cursor: float, baseline: float, open_word: bool) -> tuple[float, float, bool] | None:
        """Place `piece` (LATIN_TEXT) after `words` (entries as in self.words, appended to in
        place), the next character going at `cursor` on the line of `baseline`, `open_word`
        whether the last word may still grow. Returns the new (cursor, baseline, open_word);
        None when a word is longer than a line or has a character the font lacks (`words` is
        then left half done). The one place words are placed: a reply's fast path
        (ui/conversation/streaming/reply.py) places its newest words with it too, and the
        tail's runs must put them where it did."""
        advance, right, left = self._advance, self.right, self.left
        for token in _TOKENS.findall(piece):
            if token[0] == " ":
                cursor += advance(token)  # spaces stay at the end of a full line, as in Qt
                open_word = False
                continue
            if open_word:  # the token continues the last word: measure the word again
                x, word_baseline, _width, word, _shaped = words.pop()
                token, baseline = word + token, word_baseline
            else:
                x = cursor
            shaped, width, in_font = self._shaped(token)
            if not in_font:
                return None  # a fallback font: its line is as tall as a QTextLayout makes it
            if x + width > right and x > left:  # does not fit: the whole word starts the next line
                x, baseline = left, self.line_box(baseline)[1] + self.ascent
            if x + width > right:
                return None  # longer than a line: QTextLayout breaks it anywhere
            words.append((x, baseline, width, token, shaped))
            cursor, open_word = x + width, True
        return cursor, baseline, open_word

    def _advance(self, spaces: str) -> float:
        key = (self.font_key, spaces)
        width = _ADVANCES.get(key)
        if width is None:
            if len(_ADVANCES) >= _MAX_CACHED:
                _ADVANCES.clear()
            width = _ADVANCES[key] = self.metrics.horizontalAdvance(spaces)
        return width

    def _shaped(self, word: str) -> tuple[QStaticText, float, bool]:
        key = (self.font_key, word)
        shaped = _SHAPED.get(key)
        if shaped is None:
            if len(_SHAPED) >= _MAX_CACHED:
                _SHAPED.clear()
            text = QStaticText(word)
            text.setTextFormat(Qt.TextFormat.PlainText)
            text.prepare(QTransform(), self.font)
            shaped = _SHAPED[key] = (text, self.metrics.horizontalAdvance(word), in_primary_font(self.font, word))
        return shaped

    @property
    def bottom(self) -> float:
        return self.line_box(self.baseline)[1]

    def last_word_box(self, *, closed: bool = False) -> tuple[float, float, float]:
        """(x, top, bottom) of where the last word starts (the cursor after a space, or when
        `closed`: what comes next starts with a space)."""
        if self.open_word and self.words and not closed:
            x, baseline = self.words[-1][:2]
            return (x, *self.line_box(baseline))
        return (self.cursor, *self.line_box(self.baseline))

    def draw(self, painter: QPainter, clip_left: float, clip_top: float, clip_bottom: float) -> None:
        """Draw the words that reach into the area from `clip_left` rightwards, `clip_top` to
        `clip_bottom`, newest first (a frame's area holds the last few)."""
        self.draw_words(painter, self.words, clip_left, clip_top, clip_bottom)

    def draw_words(self, painter: QPainter, words, clip_left: float, clip_top: float, clip_bottom: float, *, set_font: bool = True) -> None:
        """draw() for a list of words placed by place() with these runs' font and lines (not
        `set_font`: the painter has that font already)."""
        if not words:
            return
        if set_font:
            painter.setFont(self.font)
        text_ascent, line_box = self.text_ascent, self.line_box

        def box(word: tuple) -> tuple[float, float, float]:
            return (word[0] + word[2], *line_box(word[1]))

        for x, baseline, _width, _word, shaped in visible_from_last(reversed(words), box, clip_left, clip_top, clip_bottom):
            painter.drawStaticText(QPointF(x, baseline - text_ascent), shaped)
