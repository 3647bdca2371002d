"""A streaming reply's frames (in-place growth, partial repaints, the quick paragraph drawing)
leave exactly the pixels that drawing everything again with Qt's own document drawing gives:
the quick paths may skip work, never ink."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QPalette

from tests.support.streaming_view import on_screen, streaming_view
from ui.conversation.streaming.live_words import LiveWords
from ui.conversation.text import document_paint as text_document_paint

WORDS = ("the keeper climbed the narrow stairs while the storm pressed on the glass and the lamp "
         "turned slowly above the rocks").split()


@pytest.mark.parametrize("dark", [False, True])
def test_streamed_frames_draw_what_a_whole_repaint_draws(qtbot: object, monkeypatch: pytest.MonkeyPatch, dark: bool) -> None:
    # The row's own paths, without the LiveWords widget that takes most frames of plain words
    # (tests/ui/conversation/streaming/test_live_words.py covers it).
    monkeypatch.setattr(LiveWords, "add", lambda self, row: False)
    monkeypatch.setattr(LiveWords, "follow", lambda self, row, region=None: False)
    view, model = streaming_view(qtbot, "Here is **a story**.\n\n", dark=dark)
    delegate = view.message_delegate()
    quick = {"grown": 0, "painted": 0}
    grow, frame, paint = delegate.grow_streaming_row, delegate.stream_frame, delegate.paint_stream_frame

    def counting_grow(row: int) -> bool:
        done = grow(row)
        quick["grown"] += done
        return done

    def counting_frame(row: int) -> object:
        area = frame(row)
        quick["grown"] += area is not None
        return area

    def counting_paint(*args: object) -> bool:
        done = paint(*args)  # type: ignore[arg-type]
        quick["painted"] += done
        return done

    delegate.grow_streaming_row = counting_grow  # type: ignore[method-assign]
    delegate.stream_frame = counting_frame  # type: ignore[method-assign]
    delegate.paint_stream_frame = counting_paint  # type: ignore[method-assign]
    for i, word in enumerate(WORDS * 3):
        model.append_text("live", word + (" " if i % 17 else "\n\n"))
        qtbot.wait(1 if i % 20 else 300)  # type: ignore[attr-defined]  # now and then a markdown render
    framed = on_screen(view)
    # The list view's own repaint of the text area (no frame pending) takes the delegate's quick
    # path and leaves the same pixels.
    delegated = {"drawn": 0}
    paint_text = delegate.paint_streaming_text

    def counting_paint_text(*args: object) -> bool:
        done = paint_text(*args)  # type: ignore[arg-type]
        delegated["drawn"] += done
        return done

    delegate.paint_streaming_text = counting_paint_text  # type: ignore[method-assign]
    row_rect = view.visualRect(model.index(model.row_of("live"), 0))
    lay = delegate.layout_for(model.item(model.row_of("live")))
    view.viewport().repaint(row_rect.x(), row_rect.y() + lay.doc_top, row_rect.width(), lay.doc_room)
    assert delegated["drawn"] == 1 and on_screen(view) == framed
    # The reference: everything drawn again by Qt's own document drawing (no quick path).
    monkeypatch.setattr(text_document_paint, "_draw_last_paragraph_lines", lambda *args: False)
    view.viewport().repaint()
    whole = on_screen(view)
    assert quick["grown"] > len(WORDS) and quick["painted"] > len(WORDS)  # the quick paths ran
    assert framed == whole
    # The streamed text is on screen, not a blank row: in the lower half (where the newest
    # words are), many sampled pixels stand out from the background, as glyphs do.
    background = view.palette().color(QPalette.ColorRole.Base).lightness()
    samples = [framed.pixelColor(x, y) for x in range(0, framed.width(), 2) for y in range(framed.height() // 2, framed.height(), 2)]
    ink = [c for c in samples if abs(c.lightness() - background) > 60]
    assert len(ink) >= 40, len(ink)
