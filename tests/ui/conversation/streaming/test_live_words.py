"""The LiveWords widget (ui/conversation/streaming/live_words.py) takes most frames of a streaming reply's plain words:
it must leave exactly the pixels the row's own drawing gives for the same text, hand the row
back whenever a frame is not one it can take, and never be what the mouse or a finished
reply meets."""

from __future__ import annotations

import re

import pytest
from PySide6.QtGui import QImage

from tests.support.streaming_view import on_screen, streaming_view
from ui.conversation.item_model import MessageItem
from ui.conversation.streaming import live_words
from ui.conversation.streaming.stream_document import _MARKDOWN_CHARS
from ui.conversation.streaming.word_runs import LATIN_TEXT
from ui.conversation.view import ConversationView

STORY = ("The keeper climbed the narrow stairs while the storm pressed on the glass, and the lamp "
         "turned slowly above the rocks. Every night the ships passed far out, their lights small "
         "against the dark water; none of them knew his name. ")


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
    """The same text drawn by the list view and the row's delegate, without the widget."""
    view._live.stop()
    view.viewport().repaint()
    return on_screen(view)


@pytest.mark.parametrize("dark", [False, True])
def test_plain_words_are_drawn_by_the_widget_with_the_rows_own_pixels(qtbot: object, dark: bool) -> None:
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
        before = (view._live.frames, asked["n"])
        model.append_text("live", piece)
        if view._live.frames > before[0]:
            assert asked["n"] == before[1]  # taken by the widget: the list view repaints nothing for it
        qtbot.wait(1)  # type: ignore[attr-defined]
        if i % 23 == 22:  # now and then: the frames so far against the row's own drawing
            framed = settled_screen(qtbot, view)
            assert framed == row_drawn_again(view), f"after piece {i}"
            checked += 1
    assert checked >= 3
    assert view._live.frames > len(tokens(STORY * 3)) // 2  # most frames were the widget's
    # At the end the row's state caught up with every word the widget showed.
    framed = settled_screen(qtbot, view)
    assert framed == row_drawn_again(view)
    row = model.row_of("live")
    stream = delegate.docs.stream("live")
    delegate.layout_for(model.item(row))
    assert stream.shown_text().endswith(STORY.rstrip(" ") + " ") or stream.shown_text().endswith(STORY.rstrip(" "))


def test_markdown_newlines_and_renders_go_back_to_the_row(qtbot: object) -> None:
    view, model = streaming_view(qtbot)
    text = ("A first line of plain words that runs on for a while.\n\nThen **bold** and `code` and a list:\n"
            "1. one item here\n2. another item\n\nAnd plain words again after it all, " * 2)
    for i, piece in enumerate(tokens(text)):
        model.append_text("live", piece)
        qtbot.wait(1 if i % 9 else 300)  # type: ignore[attr-defined]  # a markdown render is due now and then
    assert view._live.frames > 0
    framed = settled_screen(qtbot, view)
    assert framed == row_drawn_again(view)
    assert model.item(model.row_of("live")).content == text


def test_the_widget_leaves_when_the_reply_ends_and_never_takes_the_mouse(qtbot: object) -> None:
    view, model = streaming_view(qtbot, "Start. ")
    for piece in tokens(STORY):
        model.append_text("live", piece)
        qtbot.wait(1)  # type: ignore[attr-defined]
    live = view._live
    assert live.isVisible() and live.frames > 0
    assert live.testAttribute(live_words.Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    final = model.item(model.row_of("live"))
    model.update_message(MessageItem("live", "assistant", final.content, "complete", "m", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    assert not live.isVisible() and live.row == -1


def test_plain_words_are_latin_text_without_markdown_characters() -> None:
    for code in range(0x20, 0x2100):
        char = chr(code)
        expected = LATIN_TEXT.fullmatch(char) is not None and char not in _MARKDOWN_CHARS
        assert (live_words._PLAIN_WORDS.fullmatch(char) is not None) == expected, hex(code)


@pytest.mark.parametrize("piece", ["**", " `x`", "\n", " 遷移", " a_b", " <b>"])
def test_a_piece_the_widget_cannot_show_plainly_goes_the_general_way(qtbot: object, piece: str) -> None:
    view, model = streaming_view(qtbot, "Start. ")
    for word in tokens(STORY):
        model.append_text("live", word)
        qtbot.wait(1)  # type: ignore[attr-defined]
    frames = view._live.frames
    model.append_text("live", piece)
    qtbot.wait(1)  # type: ignore[attr-defined]
    assert view._live.frames == frames
    assert settled_screen(qtbot, view) == row_drawn_again(view)


def test_a_row_brought_up_to_date_elsewhere_mid_stream_keeps_its_pixels(qtbot: object) -> None:
    # A hover or a prefetch lays the streaming row out (its document catches up with the words
    # the widget drew): the widget's next paint shows that state, and it follows it after.
    view, model = streaming_view(qtbot, "Start. ")
    delegate = view.message_delegate()
    pieces = tokens(STORY * 2)
    for i, piece in enumerate(pieces):
        model.append_text("live", piece)
        qtbot.wait(1)  # type: ignore[attr-defined]
        if i % 11 == 10:
            frames = view._live.frames
            qtbot.wait(300)  # type: ignore[attr-defined]  # a render that came due is done
            delegate.layout_for(model.item(model.row_of("live")))  # what a hover's hit test does
            view._live.repaint()  # a paint before the next frame (and before it follows the row)
            framed = on_screen(view)
            assert framed == row_drawn_again(view), f"after piece {i}"
            assert view._live.frames == frames
    assert view._live.frames > len(pieces) // 3
