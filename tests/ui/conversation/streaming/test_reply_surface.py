"""A streaming reply's fast path (StreamingReply.append placing plain words itself) and the
surface that draws it over the row (ui/conversation/streaming/reply_surface.py): they must
leave exactly the pixels the row's own drawing of the settled text gives, leave a frame they
cannot take to the document, and never be what the mouse or a finished reply meets."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from tests.support.streaming_view import on_screen, streaming_view
from ui.conversation.item_model import MessageItem
from ui.conversation.streaming.reply import PLAIN_WORDS
from ui.conversation.streaming.stream_document import _MARKDOWN_CHARS
from ui.conversation.streaming.word_runs import LATIN_TEXT
from ui.conversation.view import ConversationView

STORY = (
    "The keeper climbed the narrow stairs while the storm pressed on the glass, and the lamp "
    "turned slowly above the rocks. Every night the ships passed far out, their lights small "
    "against the dark water; none of them knew his name. "
)


def tokens(text: str) -> list[str]:
    """Pieces as a model streams them: a word with the space before it; long words in two."""
    out = []
    for word in re.findall(r" ?\S+|\s+", text):
        out += [word[:5], word[5:]] if len(word) > 8 else [word]
    return out


def settled_screen(qtbot: object, view: ConversationView) -> QImage:
    """on_screen() once a markdown render that came due is done and painted (its timer may fire
    at the end of a short wait, its paint still pending)."""
    qtbot.wait(300)  # type: ignore[attr-defined]
    return on_screen(view)


def row_drawn_again(view: ConversationView) -> QImage:
    """The same text laid out in the row's document and tail (the words the fast path placed
    settled into it), drawn by the list view and the row's delegate, without the surface."""
    view.reply_surface().stop()
    reply = view.message_delegate().docs.stream("live")
    reply.settle(reply.text)
    view.viewport().repaint()
    return on_screen(view)


def quick_frames(view: ConversationView) -> int:
    """Frames the reply's fast path took."""
    return view.message_delegate().docs.stream("live").quick_frames


@pytest.mark.parametrize("dark", [False, True])
def test_plain_words_are_drawn_on_the_surface_with_the_rows_own_pixels(qtbot: object, dark: bool) -> None:
    view, model = streaming_view(qtbot, "Here is **a story**.\n\n", dark=dark)
    delegate = view.message_delegate()
    asked = {"n": 0}  # repaints asked of the list view's viewport
    update = view.viewport().update

    def counting_update(*args: object) -> None:
        asked["n"] += 1
        update(*args)

    view.viewport().update = counting_update  # type: ignore[method-assign]
    checked = 0
    for i, piece in enumerate(tokens(STORY * 3)):
        before = (quick_frames(view), asked["n"])
        model.append_text("live", piece)
        if quick_frames(view) > before[0]:
            assert asked["n"] == before[1]  # taken by the fast path: the list view repaints nothing for it
        qtbot.wait(1)  # type: ignore[attr-defined]
        if i % 23 == 22:  # now and then: the frames so far against the row's own drawing
            framed = settled_screen(qtbot, view)
            assert framed == row_drawn_again(view), f"after piece {i}"
            checked += 1
    assert checked >= 3
    assert quick_frames(view) > len(tokens(STORY * 3)) // 2  # most frames were the fast path's
    # At the end the row's document caught up with every word the fast path showed.
    framed = settled_screen(qtbot, view)
    assert framed == row_drawn_again(view)
    row = model.row_of("live")
    stream = delegate.docs.stream("live").stream
    delegate.layout_for(model.item(row))
    assert stream.shown_text().endswith(STORY.rstrip(" ") + " ") or stream.shown_text().endswith(STORY.rstrip(" "))


def test_markdown_newlines_and_renders_go_back_to_the_row(qtbot: object) -> None:
    view, model = streaming_view(qtbot)
    text = (
        "A first line of plain words that runs on for a while.\n\nThen **bold** and `code` and a list:\n"
        "1. one item here\n2. another item\n\nAnd plain words again after it all, " * 2
    )
    for i, piece in enumerate(tokens(text)):
        model.append_text("live", piece)
        qtbot.wait(1 if i % 9 else 300)  # type: ignore[attr-defined]  # a markdown render is due now and then
    assert quick_frames(view) > 0
    framed = settled_screen(qtbot, view)
    assert framed == row_drawn_again(view)
    assert model.item(model.row_of("live")).content == text


def test_the_surface_leaves_when_the_reply_ends_and_never_takes_the_mouse(qtbot: object) -> None:
    view, model = streaming_view(qtbot, "Start. ")
    for piece in tokens(STORY):
        model.append_text("live", piece)
        qtbot.wait(1)  # type: ignore[attr-defined]
    live = view.reply_surface()
    assert live.isVisible() and quick_frames(view) > 0
    assert live.testAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    final = model.item(model.row_of("live"))
    model.update_message(MessageItem("live", "assistant", final.content, "complete", "m", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    assert not live.isVisible() and live.row == -1


def test_plain_words_are_latin_text_without_markdown_characters() -> None:
    for code in range(0x20, 0x2100):
        char = chr(code)
        expected = LATIN_TEXT.fullmatch(char) is not None and char not in _MARKDOWN_CHARS
        assert (PLAIN_WORDS.fullmatch(char) is not None) == expected, hex(code)


@pytest.mark.parametrize("piece", ["**", " `x`", "\n", " 遷移", " a_b", " <b>"])
def test_a_piece_the_fast_path_cannot_show_plainly_goes_to_the_document(qtbot: object, piece: str) -> None:
    view, model = streaming_view(qtbot, "Start. ")
    for word in tokens(STORY):
        model.append_text("live", word)
        qtbot.wait(1)  # type: ignore[attr-defined]
    frames = quick_frames(view)
    model.append_text("live", piece)
    qtbot.wait(1)  # type: ignore[attr-defined]
    assert quick_frames(view) == frames
    assert settled_screen(qtbot, view) == row_drawn_again(view)


def test_a_reply_settled_by_a_full_layout_mid_stream_keeps_its_pixels(qtbot: object) -> None:
    # A full layout of the row (a resize, a style change) settles the fast path's words into the
    # document: the surface's next paint shows that state, and the fast path goes on from it.
    view, model = streaming_view(qtbot, "Start. ")
    reply = view.message_delegate().docs.stream("live")
    pieces = tokens(STORY * 2)
    for i, piece in enumerate(pieces):
        model.append_text("live", piece)
        qtbot.wait(1)  # type: ignore[attr-defined]
        if i % 11 == 10:
            qtbot.wait(300)  # type: ignore[attr-defined]  # a render that came due is done
            frames = quick_frames(view)
            reply.settle(reply.text)
            view.reply_surface().repaint()  # a paint before the next frame
            framed = on_screen(view)
            assert framed == row_drawn_again(view), f"after piece {i}"
            assert quick_frames(view) == frames
    assert quick_frames(view) > len(pieces) // 3


def test_a_word_after_a_pending_newline_waits_for_what_the_newline_is(qtbot: object) -> None:
    # "\n1." then " x" (no render due in between): the line becomes a list item and "1." moves
    # down to a line of its own. The document's tail lays that out, never the fast path after
    # the line "1." was on.
    view, model = streaming_view(qtbot, "Intro words")
    for piece in (" and", " foo", "\n1."):
        model.append_text("live", piece)
    frames = quick_frames(view)
    model.append_text("live", " x")
    assert quick_frames(view) == frames
    qtbot.wait(1)  # type: ignore[attr-defined]
    assert on_screen(view) == row_drawn_again(view)
