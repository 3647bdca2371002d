"""A streaming reply's frames (the fast path's words, partial repaints, the quick paragraph
drawing) leave exactly the pixels that drawing everything again with Qt's own document drawing
gives: the quick paths may skip work, never ink. Here without the surface over the row (a
faded or disabled row's text is drawn by the row's own paint, through the same
StreamingReply.paint)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QPalette, QRegion

from tests.support.streaming_view import on_screen, streaming_view
from ui.conversation.streaming import reply as streaming_reply
from ui.conversation.text import document_paint
from ui.conversation.view import ConversationView

WORDS = ("the keeper climbed the narrow stairs while the storm pressed on the glass and the lamp turned slowly above the rocks").split()


@pytest.mark.parametrize("dark", [False, True])
def test_streamed_frames_draw_what_a_whole_repaint_draws(qtbot: object, monkeypatch: pytest.MonkeyPatch, dark: bool) -> None:
    monkeypatch.setattr(ConversationView, "_place_surface", lambda self, row: False)
    view, model = streaming_view(qtbot, "Here is **a story**.\n\n", dark=dark)
    delegate = view.message_delegate()
    repainted: list[QRect] = []  # what frames asked the viewport to repaint
    update = view.viewport().update

    def counting_update(*args: object) -> None:
        repainted.append(args[0].boundingRect() if args and isinstance(args[0], QRegion) else QRect())
        update(*args)

    view.viewport().update = counting_update  # type: ignore[method-assign]
    for i, word in enumerate(WORDS * 3):
        model.append_text("live", word + (" " if i % 17 else "\n\n"))
        qtbot.wait(1 if i % 20 else 300)  # type: ignore[attr-defined]  # now and then a markdown render
    framed = on_screen(view)
    reply = delegate.docs.stream("live")
    assert not view.reply_surface().isVisible()
    assert reply.quick_frames > len(WORDS)  # the fast path ran
    row_rect = view.visualRect(model.index(model.row_of("live"), 0))
    partial = [r for r in repainted if r.isValid() and r.height() < row_rect.height() // 3]
    assert len(partial) > len(WORDS)  # frames repainted a part of the row, not all of it
    # The reference: the text settled into the document and its tail, and everything drawn
    # again by Qt's own document drawing (no quick path).
    reply.settle(reply.text)
    for module in (document_paint, streaming_reply):
        monkeypatch.setattr(module, "draw_last_paragraph_lines", lambda *args: False)
    view.viewport().repaint()
    whole = on_screen(view)
    assert framed == whole
    # The streamed text is on screen, not a blank row: in the lower half (where the newest
    # words are), many sampled pixels stand out from the background, as glyphs do.
    background = view.palette().color(QPalette.ColorRole.Base).lightness()
    samples = [framed.pixelColor(x, y) for x in range(0, framed.width(), 2) for y in range(framed.height() // 2, framed.height(), 2)]
    ink = [c for c in samples if abs(c.lightness() - background) > 60]
    assert len(ink) >= 40, len(ink)
