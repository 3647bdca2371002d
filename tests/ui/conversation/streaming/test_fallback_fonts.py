"""Streamed text with characters the font lacks (Chinese, Japanese: drawn with a fallback font
whose lines are taller) sits where Qt's layout of the finished reply puts it: the same line
tops, baselines and bottom while it streams as once it is done, so the reply does not move
or change height when it finishes. Needs a CJK font: the suite brings its own (set up by
tests/conftest.py; tests/support/fonts.py fails saying so when Qt does not draw with it)."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QFont, QTextDocument, QTextLayout

from tests.support.cjk_font import FAMILY, LATIN_FAMILY, LATIN_METRICS, LINE_GAP, UNITS_PER_EM
from tests.support.fonts import require_cjk_fallback, setup_hint
from tests.support.streaming_view import on_screen, streaming_view
from ui.conversation.item_model import MessageItem
from ui.conversation.row_layout import DocumentStore
from ui.conversation.streaming.plain_tail import PlainTail, TailAnchor
from ui.conversation.streaming.word_runs import WordRuns, past_fallback_run, primary_font
from ui.conversation.view import ConversationView

WIDTH = 300
JAPANESE = "灯台守は毎晩、長い階段を上って灯りをともした。嵐の夜も、遠くを通り過ぎる船を見守っていた。"
ENGLISH = "The keeper climbed the narrow stairs while the storm pressed on the glass and the lamp turned slowly. "


def tokens(text: str) -> list[str]:
    """Pieces as a model streams them: a Latin word with the space before it, CJK one or two
    characters at a time."""
    out: list[str] = []
    for run in re.findall(r" ?[\u0020-\u052F]+|[^\u0020-\u052F]+", text):
        if run.isascii():
            out += re.findall(r" ?\S+| +", run)
        else:
            out += [run[i : i + 2] for i in range(0, len(run), 2)]
    return out


STORIES = {
    "japanese": JAPANESE * 3,
    "english_then_japanese": ENGLISH * 2 + JAPANESE * 2,
    "japanese_then_english": JAPANESE + ENGLISH * 2,
    "mixed_words": " ".join(f"{a} {b}" for a, b in zip(ENGLISH.split(), JAPANESE[::2])) * 2,
    "japanese_then_an_english_paragraph": JAPANESE * 2 + "\n\n" + ENGLISH * 2,
    # Where the CJK text's script run ends, and so the lines it makes taller: an ASCII letter
    # starts a Latin run; spaces, digits and punctuation join the run before them.
    "latin_after_han_on_the_next_line": ENGLISH[:75] + "灯台守" * 4 + " model" + ENGLISH * 2,
    "digits_and_punctuation_after_han": ENGLISH + "遷移" + " 2024, 12.5% (3/4)" * 6 + " model" + ENGLISH * 2,
    "han_then_latin_in_one_line": "遷移\n遷移model\nIn this section, " + ENGLISH * 2,
    "a_line_break_inside_a_han_run": ENGLISH[:60] + "灯台守" * 12 + "model " + ENGLISH * 2,
    "cjk_punctuation_after_han": "灯台守は毎晩。「灯台」、" + ENGLISH * 2,
    "cjk_punctuation_in_latin_after_han": "灯台 model words、" + ENGLISH * 2,  # the Latin run: every line of it
    "fullwidth_digit_after_han": "灯台１ model" + ENGLISH * 2,  # of no script, but past_fallback_run does not know it
}
# Stories whose Latin text after their CJK text streams as a tail (Qt's lines of a Latin run of
# its own are the font's); the others' goes into the document until the paragraph ends.
LATIN_RUN_AFTER_CJK = {
    "japanese_then_english",
    "mixed_words",
    "latin_after_han_on_the_next_line",
    "digits_and_punctuation_after_han",
    "han_then_latin_in_one_line",
    "a_line_break_inside_a_han_run",
    "cjk_punctuation_after_han",
}


class Clock:
    """A StreamDocument's clock: a second passes with every piece, so a render is never held back."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(doc: QTextDocument) -> list[tuple[float, float, float]]:
    """(top, baseline, bottom) of each line of the document's last block, in its coordinates."""
    block = doc.lastBlock()
    top = doc.documentLayout().blockBoundingRect(block).top()
    layout = block.layout()
    return [
        (top + line.y(), top + line.y() + line.ascent(), top + line.y() + line.height())
        for line in (layout.lineAt(i) for i in range(layout.lineCount()))
    ]


def _shown_lines(doc: QTextDocument, tail: PlainTail | None) -> list[tuple[float, float, float]]:
    """The lines a streaming document shows in its last paragraph: its own, then its tail's (the
    tail's first one is the document's last line, grown, unless the tail starts below it)."""
    lines = _lines(doc)
    if tail is None:
        return lines
    boxes = tail.line_boxes()
    if abs(boxes[0][0] - lines[-1][0]) < 0.01:
        lines = lines[:-1]
    return lines + boxes


def _assert_same_lines(streamed: list, final: list, what: str) -> None:
    assert len(streamed) == len(final), what
    for i, (got, want) in enumerate(zip(streamed, final)):
        assert got == pytest.approx(want, abs=0.01), f"{what}: line {i} (top, baseline, bottom)"


def test_cjk_text_is_drawn_with_the_suites_own_font(qapp: object) -> None:
    # The other tests here mean something only with a taller fallback font; this names what is
    # missing, and that it is the generated one (the same font on every machine).
    assert require_cjk_fallback() == FAMILY, setup_hint()


@pytest.mark.parametrize("story", sorted(STORIES))
def test_a_streamed_paragraph_has_the_lines_of_the_finished_one(qapp: object, story: str) -> None:
    require_cjk_fallback()
    clock = Clock()
    store = DocumentStore(on_refused=lambda url: None, clock=clock)
    content = "Here is **a story**.\n\n"
    pieces = tokens(STORIES[story])
    tails = tails_after_cjk = 0
    for i, piece in enumerate(pieces):
        content += piece
        clock.now += 1.0
        store.document(MessageItem("live", "assistant", content, "streaming", "m", {}), WIDTH)
        reply = store.stream("live")
        assert reply is not None
        stream, height = reply.stream, reply.stream.height()
        final, _rendered = store.document(MessageItem(f"done{i}", "assistant", content, "complete", "m", {}), WIDTH)
        streamed, done = _shown_lines(stream.doc, stream.tail()), _lines(final)
        _assert_same_lines(streamed, done, f"after piece {i} {piece!r}")
        assert height == pytest.approx(max(stream.doc_size()[1], done[-1][2]), abs=0.01)
        tails += stream.tail() is not None
        tails_after_cjk += stream.tail() is not None and not content.isascii()
    assert len(done) >= 4
    if story.startswith("english") or story.endswith("paragraph"):
        assert tails > 10  # plain English streamed as a tail, before the CJK text or in its own paragraph
    if story in LATIN_RUN_AFTER_CJK:
        assert tails_after_cjk > 10  # the Latin words after the CJK text, in the same paragraph too
    elif not story.endswith("paragraph") and story != "cjk_punctuation_in_latin_after_han":
        assert tails_after_cjk == 0


def _document(text: str, font: QFont | None = None, width: float = 200) -> QTextDocument:
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    if font is not None:
        doc.setDefaultFont(font)
    doc.setPlainText(text)
    doc.setTextWidth(width)
    doc.size()
    return doc


def _grow_and_compare(start: str, pieces: list[str], font: QFont | None = None) -> PlainTail:
    """Grow a tail after a document of `start` piece by piece, checking after each piece that it
    has the lines of the same text laid out whole, and at the end those of Qt's document."""
    doc = _document(start, font)
    anchor = TailAnchor.of(doc)
    tail = PlainTail(anchor, pieces[0])
    for piece in pieces[1:]:
        tail = tail.extended(piece)
        whole = PlainTail(anchor, tail.text)
        _assert_same_lines(tail.line_boxes(), whole.line_boxes(), f"after {piece!r}")
        assert tail.bottom == pytest.approx(whole.bottom)
    final = _document(start + tail.text, font)
    _assert_same_lines(_shown_lines(doc, tail), _lines(final), "against the document")
    return tail


def test_the_suites_cjk_font_has_a_line_gap_that_qt_counts(qapp: object) -> None:
    # The harder case for the tail: a QTextDocument adds a line's gap (leading) to its height.
    require_cjk_fallback()
    layout = QTextLayout("灯台守の物語", QFont())
    layout.beginLayout()
    line = layout.createLine()
    line.setLineWidth(1_000.0)
    layout.endLayout()
    assert line.leading() == pytest.approx(
        LINE_GAP / UNITS_PER_EM * QFont().pixelSize() if QFont().pixelSize() > 0 else line.leading(), abs=0.1
    )
    assert line.leading() > 1.0
    doc = _document("灯台守の物語")
    assert _lines(doc)[0][2] == math.ceil(line.ascent() + line.descent() + line.leading())


def test_the_cjk_letters_and_punctuation_past_fallback_run_knows_have_the_scripts_it_assumes() -> None:
    # Han, kana and Hangul letters end their script run at a Latin letter; the punctuation of
    # no script (Common) joins the run before it: Unicode's Scripts.txt, as fontTools has it.
    from fontTools import unicodedata

    from ui.conversation.streaming import word_runs

    for pattern, scripts in ((word_runs.CJK_LETTER, {"Hani", "Hira", "Kana", "Hang"}), (word_runs.CJK_COMMON, {"Zyyy"})):
        chars = [chr(code) for code in range(0x2000, 0x10000) if pattern.fullmatch(chr(code))]
        assert chars and {unicodedata.script(char) for char in chars} == scripts, pattern.pattern


def test_where_the_cjk_script_run_ends(qapp: object) -> None:
    font = QFont()
    assert past_fallback_run(font, "plain words, 2024.")
    assert past_fallback_run(font, "遷移 model") and past_fallback_run(font, "遷移model")
    assert past_fallback_run(font, "灯台守は毎晩。「灯台」、 model")
    assert not past_fallback_run(font, "遷移") and not past_fallback_run(font, "遷移 2024, (3/4)")
    assert not past_fallback_run(font, "model、 words")  # in the Latin run
    assert not past_fallback_run(font, "「 model")  # no letter before it: in the Latin run after it
    assert not past_fallback_run(font, "遷移１ model") and not past_fallback_run(font, "遷移Ａ model")


def test_a_tail_grown_piece_by_piece_has_the_lines_of_one_laid_out_whole(qapp: object) -> None:
    # PlainTail.extended(): CJK after a long line of Latin words, Latin words after CJK lines.
    require_cjk_fallback()
    # (No CJK punctuation before Latin words: with it they are one script run with the CJK text
    # before them, which a tail never lays out again; StreamDocument gives a tail no CJK.)
    _grow_and_compare(
        "short",
        tokens(" start next " + "x" * 40 + " 灯台守は毎晩長い階段を上って灯りをともした" + ENGLISH + "灯台守の物語" + " and more words"),
    )


@pytest.mark.parametrize(
    ("start", "text"),
    [
        # (Not CJK after a Latin last line: the document's line would move down, its baseline with
        # it, which a tail does not do; StreamDocument puts such text into the document.)
        ("short 灯台", " and a few more words that wrap" * 2),  # a tail of Latin words on a line with CJK
        ("short 灯台", "守の物語 then words"),
        ("灯台守の物語灯台守の物語灯台守の物語灯台守", " words " + "x" * 30),  # after CJK lines
    ],
)
def test_the_first_tail_line_is_as_tall_as_qt_makes_it_with_both_texts(qapp: object, start: str, text: str) -> None:
    # The tail's first line is the document's last: its ascent, descent and line gap are the
    # larger of the two texts' (the gap measured down from the larger ascent, as Qt merges them).
    require_cjk_fallback()
    _grow_and_compare(start, tokens(text))


def test_a_primary_font_with_a_line_gap_gives_the_lines_of_the_document(qapp: object) -> None:
    # Words placed one by one (WordRuns) on lines of the primary font alone count its line gap.
    font = QFont(LATIN_FAMILY)
    font.setPixelSize(12)
    raw = primary_font(font)[0]
    assert raw.familyName() == LATIN_FAMILY, setup_hint()
    assert raw.leading() == pytest.approx(LATIN_METRICS[2] / UNITS_PER_EM * 12, abs=0.1)
    tail = _grow_and_compare("short", tokens(" start " + ENGLISH * 2), font)
    assert tail.runs is not None and len(tail.line_boxes()) > 4
    _grow_and_compare("short", tokens(" start " + ENGLISH + "灯台守は毎晩" + ENGLISH), font)


def test_text_a_fallback_font_draws_goes_into_the_document_until_the_paragraph_ends(qapp: object) -> None:
    # Qt makes every line of a script run with a fallback font's character as tall as that
    # font's line, lines above included ("words, 、" is one run): only the document knows.
    require_cjk_fallback()
    clock = Clock()
    store = DocumentStore(on_refused=lambda url: None, clock=clock)
    content = "The keeper climbed"
    store.document(MessageItem("live", "assistant", content, "streaming", "m", {}), WIDTH)
    reply = store.stream("live")
    assert reply is not None
    stream = reply.stream
    for piece in (" the", " narrow", " stairs"):
        content += piece
        reply.append(content)
        assert stream.tail() is not None  # Latin: a plain tail (its words placed by the fast path)
    assert reply.quick_frames >= 2
    reply.settle(content)
    revision, frames = stream.doc.revision(), reply.quick_frames
    content += "、灯台"
    damage = reply.append(content)
    assert reply.quick_frames == frames  # the document's way
    assert stream.tail() is None and stream.doc.revision() != revision
    assert stream.doc.toPlainText() == content and stream.shown_text() == content
    assert damage is not None and damage.rects[0][:2] == (0, 0)  # the whole paragraph: its lines above grew too
    assert damage.rects[0][3] > stream.doc.size().height()
    content += " and the lamp"
    reply.append(content)
    assert reply.quick_frames == frames and stream.doc.toPlainText() == content  # the rest of the paragraph too
    final, _rendered = store.document(MessageItem("done", "assistant", content, "complete", "m", {}), WIDTH)
    _assert_same_lines(_lines(stream.doc), _lines(final), "the paragraph")
    clock.now += 1.0
    content += "\n\nA new paragraph"
    revision = stream.doc.revision()
    reply.append(content)
    assert stream.doc.revision() != revision  # rendered: a new block
    content += " of words"
    reply.append(content)
    content += " and more"
    reply.append(content)
    assert stream.tail() is not None and reply.quick_frames == frames + 1  # plain words have a tail again


def test_a_word_with_a_character_the_font_lacks_is_not_placed_as_a_word(qapp: object) -> None:
    # WordRuns draws a word in the font alone; one with a character the font lacks gets a
    # fallback font, whose line height only a QTextLayout knows.
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setPlainText("x")
    anchor = TailAnchor.of(doc)
    raw = primary_font(anchor.font)[0]
    lacking = next(chr(code) for code in range(0x250, 0x530) if not raw.supportsCharacter(code) and chr(code).isalpha())
    runs = WordRuns.after(anchor.font, anchor.metrics, 0.0, 200.0, 10.0, anchor.ascent, 0.0, anchor.bottom)
    assert runs.add(" plain words") is not None
    assert runs.add(" plain w" + lacking + "rd") is None
    tail = PlainTail(anchor, " plain").extended(" w" + lacking + "rd").extended(" more")
    _assert_same_lines(tail.line_boxes(), PlainTail(anchor, tail.text).line_boxes(), "the tail")


# Stories for the screen, as pieces: where a newline falls in a piece, and what follows it,
# decides what it is (a space inside a paragraph, a paragraph's end, a list item's start).
ON_SCREEN = {
    "four_stories": tokens(
        STORIES["japanese_then_english"]
        + "\n\n"
        + STORIES["mixed_words"]
        + "\n\n"
        + STORIES["a_line_break_inside_a_han_run"]
        + "\n\n"
        + STORIES["digits_and_punctuation_after_han"]
    ),
    # The starter's recorded reply (bench/data/starter_reply_pieces.json) as it begins.
    "starter": ["\n\n", "遷移", "\n", "遷移", "model", "\n", "In", " this", " section", ","] + tokens(ENGLISH * 2),
    "a_soft_newline_inside_a_cjk_piece": ["灯台守は", "毎晩\n長い", "階段を"] + tokens(JAPANESE * 2),
    "a_newline_at_a_pieces_end_then_cjk": ["灯台守は", "毎晩\n", "長い", "階段を", "\n上って"] + tokens(JAPANESE * 2),
    "a_blank_line_after_cjk": ["灯台守は", "毎晩", "\n", "\n", "長い", "階段を", "\n\n", "上って"] + tokens(JAPANESE + "\n\n" + ENGLISH),
    "a_list_item_after_cjk": ["灯台守は", "毎晩", "\n", "-", " 長い", "階段を", "\n", "1", ".", " 上って"] + tokens(JAPANESE + ENGLISH),
}


def _all_lines(doc: QTextDocument) -> list[tuple[float, float, float]]:
    """(top, baseline, bottom) of every line of the document, in its coordinates."""
    lines = []
    block = doc.firstBlock()
    while block.isValid():
        top = doc.documentLayout().blockBoundingRect(block).top()
        layout = block.layout()
        lines += [
            (top + line.y(), top + line.y() + line.ascent(), top + line.y() + line.height())
            for line in (layout.lineAt(i) for i in range(layout.lineCount()))
        ]
        block = block.next()
    return lines


@pytest.mark.parametrize("story", sorted(set(ON_SCREEN) - {"four_stories"}))
def test_newlines_after_cjk_show_as_the_finished_reply_has_them_between_renders(qapp: object, story: str) -> None:
    # No render comes due (the clock stands still): a newline in a paragraph the document
    # takes piece by piece shows as nothing until the text after it says what it is, then as
    # a space, or the document is rendered at once (a paragraph's end, a list item).
    require_cjk_fallback()
    store = DocumentStore(on_refused=lambda url: None, clock=Clock())
    content = "Start. "
    for i, piece in enumerate(ON_SCREEN[story]):
        content += piece
        store.document(MessageItem("live", "assistant", content, "streaming", "m", {}), WIDTH)
        reply = store.stream("live")
        assert reply is not None
        stream = reply.stream
        final, _rendered = store.document(MessageItem(f"done{i}", "assistant", content, "complete", "m", {}), WIDTH)
        streamed, tail = _all_lines(stream.doc), stream.tail()
        if tail is not None:
            boxes = tail.line_boxes()
            streamed = (streamed[:-1] if abs(boxes[0][0] - streamed[-1][0]) < 0.01 else streamed) + boxes
        _assert_same_lines(streamed, _all_lines(final), f"after piece {i} {piece!r}")
        assert stream.height() == pytest.approx(final.size().height(), abs=0.01), f"after piece {i} {piece!r}"


@pytest.mark.parametrize("story", sorted(ON_SCREEN))
def test_a_streaming_row_with_cjk_shows_the_text_of_the_finished_reply(qtbot: object, story: str) -> None:
    # On screen, frame after frame: the streamed reply's text, pixel for pixel, is what the
    # finished reply with the same text shows (another view, the same size, beside it).
    require_cjk_fallback()
    view, model = streaming_view(qtbot, "Start. ")
    reference = ConversationView()
    qtbot.addWidget(reference)  # type: ignore[attr-defined]
    reference.resize(view.size())
    reference.show()
    qtbot.waitExposed(reference)  # type: ignore[attr-defined]
    question = model.item(0)
    delegate = view.message_delegate()
    pieces = ON_SCREEN[story]
    every = 4 if len(pieces) > 100 else 1
    checked = 0
    for i, piece in enumerate(pieces):
        model.append_text("live", piece)
        qtbot.wait(1)  # type: ignore[attr-defined]
        if i % every != every - 1:
            continue
        item = model.item(model.row_of("live"))
        lay = delegate.layout_for(item)
        row = view.visualRect(model.index(model.row_of("live"), 0))
        text = QRect(
            row.x() + lay.doc_left, row.y() + lay.doc_top, math.ceil(lay.doc.textWidth()), math.ceil(delegate.docs.stream("live").height())
        )
        streamed = on_screen(view).copy(text)
        reference.conversation_model().set_messages([question, replace(item, status="complete")])
        reference.viewport().repaint()
        assert on_screen(reference).copy(text) == streamed, f"after piece {i} {piece!r}"
        checked += 1
    assert checked > 20
