"""Pending streamed text drawn after a document's last line (ui/conversation/streaming/plain_tail.py): where it goes,
how it wraps, what a new character can change, and that it leaves ink where it says."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument

from tests.support.fonts import require_cjk_fallback
from ui.conversation.streaming.plain_tail import PlainTail, TailAnchor


def _doc(text: str, width: float = 300) -> QTextDocument:
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setPlainText(text)
    doc.setTextWidth(width)
    doc.size()  # laid out
    return doc


def _last_line(doc: QTextDocument):
    layout = doc.lastBlock().layout()
    return layout.lineAt(layout.lineCount() - 1)


def test_pending_text_continues_the_last_line(qapp: object) -> None:
    doc = _doc("first paragraph\nand a short last line")
    anchor = TailAnchor.of(doc)
    tail = PlainTail(anchor, " more")
    last = _last_line(doc)
    assert anchor.x == pytest.approx(last.naturalTextWidth(), abs=1)
    assert tail.first_top == pytest.approx(doc.documentLayout().blockBoundingRect(doc.lastBlock()).top() + last.y())
    assert tail.bottom <= doc.size().height() + 1  # still on that line: the row needs no more height
    x, top, bottom = tail.last_word_box()
    assert x > anchor.x and top == pytest.approx(tail.first_top)


def test_a_new_word_that_does_not_fit_starts_the_next_line_and_a_word_piece_never_does(qapp: object) -> None:
    text = "end"
    while True:  # a last line that is nearly full
        doc = _doc(text, width=200)
        if _last_line(doc).naturalTextWidth() > 160 or text.count(" ") > 200:
            break
        text = "a " + text
    anchor = TailAnchor.of(doc)
    assert anchor.right - anchor.x < 60
    wide = " " + "w" * 12
    moved = PlainTail(anchor, wide)
    assert moved.first_top > anchor.top  # on the next line, as the document would wrap it
    glued = PlainTail(anchor, "ing")  # continues "end": stays on the last line
    assert glued.first_top == pytest.approx(anchor.top)


def test_newlines_and_long_text_wrap_below(qapp: object) -> None:
    doc = _doc("short", width=200)
    anchor = TailAnchor.of(doc)
    one = PlainTail(anchor, " tail")
    two = PlainTail(anchor, " tail\n\nnext paragraph")
    long = PlainTail(anchor, " " + "many words " * 30)
    line = anchor.metrics.lineSpacing()
    assert two.bottom >= one.bottom + 2 * line - 1
    assert long.bottom > one.bottom + 5 * line
    x, top, _bottom = long.last_word_box()
    assert top > anchor.top + 4 * line  # a new character can only change the last line


def test_draw_leaves_ink_only_after_the_document(qapp: object) -> None:
    doc = _doc("left part", width=300)
    anchor = TailAnchor.of(doc)
    tail = PlainTail(anchor, " RIGHT")
    image = QImage(320, 60, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setPen(QColor("black"))
    tail.draw(painter, QRectF(0, 0, 320, 60))
    painter.end()
    inked = [x for x in range(320) for y in range(60) if image.pixelColor(x, y).alpha() > 0]
    assert inked and min(inked) >= int(anchor.x) - 1  # nothing drawn over the document's text


def test_newlines_are_shown_as_markdown_will_show_them() -> None:
    from ui.conversation.streaming.plain_tail import line_breaks

    assert line_breaks("one\ntwo", in_code=False) == "one two"  # a soft break: same paragraph
    assert line_breaks("one\n\ntwo", in_code=False) == "one\u2028\u2028two"  # a new paragraph
    assert line_breaks("intro\n- item\n# Title", in_code=False) == "intro\u2028- item\u2028# Title"
    assert line_breaks("x = 1\ny = 2", in_code=True) == "x = 1\u2028y = 2"  # inside a code fence
    text = "a\nb\n\nc\n"
    assert len(line_breaks(text, in_code=False)) == len(text)  # positions stay the same
    # Trailing newlines show as nothing (markdown drops them; the next text says what they are).
    assert line_breaks("one\n\n ", in_code=False) == "one   " and line_breaks("x\n", in_code=True) == "x "


def test_a_paragraphs_newlines_settle_once_the_text_after_them_says_what_they_are() -> None:
    from ui.conversation.streaming.plain_tail import settle_newlines

    assert settle_newlines("遷移\n遷移model\nIn", "x") == ("遷移 遷移model In", "")  # soft breaks: spaces
    assert settle_newlines("毎晩\n", "x") == ("毎晩", "\n") and settle_newlines("\n\n ", "x") == ("", "\n\n ")
    assert settle_newlines("\n。", "x") == (" 。", "") and settle_newlines("a b ", "x") == ("a b ", "")
    for text in ("\n\n長い", "\n- 長い", "\n1. x", "\n長い", "a \nb", "a\\\nb", "\n 長い", "\n#"):
        assert settle_newlines(text, "" if text == "\n長い" else "a") is None, text  # only a render shows them


def _ink(tail: PlainTail, size: tuple[int, int] = (320, 200)) -> QImage:
    image = QImage(*size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setPen(QColor("black"))
    tail.draw(painter, QRectF(0, 0, *size))
    painter.end()
    return image


def test_an_extended_tail_wraps_and_draws_like_one_laid_out_whole(qapp: object) -> None:
    doc = _doc("the keeper climbed", width=200)
    anchor = TailAnchor.of(doc)
    words = (
        "the narrow stairs while the storm pressed on the glass and the lamp turned slowly above the rocks of the northern point"
    ).split()
    grown = PlainTail(anchor, " " + words[0])
    first = grown
    for word in words[1:]:
        # A word in two pieces, as tokens split it: the second piece continues the word.
        grown = grown.extended(" " + word[:2]).extended(word[2:])
    whole = PlainTail(anchor, grown.text)
    assert grown.text == " " + " ".join(words)
    assert grown.bottom == pytest.approx(whole.bottom) and grown.bottom > anchor.bottom + 2 * anchor.metrics.lineSpacing()
    assert grown.last_word_box() == pytest.approx(whole.last_word_box())
    assert _ink(grown) == _ink(whole)
    assert first.text == " " + words[0] and first.bottom <= anchor.bottom + 1  # the older tail is unchanged


def test_words_longer_than_a_line_and_text_without_spaces_are_laid_out_by_qt(qapp: object) -> None:
    require_cjk_fallback()  # the Japanese text is drawn with a fallback font, whose lines are taller
    anchor = TailAnchor.of(_doc("short", width=200))
    tail = PlainTail(anchor, " start").extended(" next").extended(" " + "x" * 60).extended(" 灯台守の物語は長い")
    whole = PlainTail(anchor, tail.text)
    assert tail.text == " start next " + "x" * 60 + " 灯台守の物語は長い"
    assert tail.bottom == pytest.approx(whole.bottom) and tail.bottom > anchor.bottom + anchor.metrics.lineSpacing()
    assert _ink(tail) == _ink(whole)
