"""The conversation view: long chats render only what is seen, streaming, footer, actions, versions."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QGuiApplication, QRegion

from tests.support.view_actions import click_action
from ui.conversation.item_model import ConversationModel, MessageItem, MessageRole
from ui.conversation.row_layout import actions_for, metrics_line, status_notice
from ui.conversation.view import ConversationView

METRICS = {
    "ttft_ms": 95.2,
    "prompt_tokens": 21,
    "cached_tokens": 0,
    "prompt_tps": 410.2,
    "gen_tokens": 48,
    "gen_tps": 61.04,
    "stop_reason": "stop",
}


def user(i: int | str, text: str = "", **kw: object) -> MessageItem:
    return MessageItem(f"u{i}", "user", text or f"Question {i}?", "complete", None, {}, **kw)  # type: ignore[arg-type]


def reply(i: int | str, text: str = "", status: str = "complete", **kw: object) -> MessageItem:
    kw.setdefault("metrics", dict(METRICS))
    return MessageItem(
        f"a{i}",
        "assistant",
        text or f"Answer **{i}** with some words.",
        status,  # type: ignore[arg-type]
        "tiny-model",
        **kw,
    )


def chat(n: int) -> list[MessageItem]:
    return [user(i // 2) if i % 2 == 0 else reply(i // 2, "Paragraph one.\n\n- a\n- b\n\n" * (1 + i % 3)) for i in range(n)]


def make_view(qtbot: object, items: list[MessageItem], height: int = 600) -> ConversationView:
    view = ConversationView()
    qtbot.addWidget(view)  # type: ignore[attr-defined]
    view.resize(640, height)
    view.conversation_model().set_messages(items)
    view.show()
    qtbot.waitExposed(view)  # type: ignore[attr-defined]
    qtbot.wait(50)  # type: ignore[attr-defined]  # let delayed layouts and the prefetch run
    return view


def index_of(view: ConversationView, message_id: str):  # noqa: ANN201
    return view.model().index(view.conversation_model().row_of(message_id), 0)


# --- model -------------------------------------------------------------------------------


def test_model_api(qapp: object) -> None:
    model = ConversationModel()
    changes: list[tuple[int, int]] = []
    appended: list[int] = []
    model.dataChanged.connect(lambda a, b, roles=(): changes.append((a.row(), b.row())))
    model.text_appended.connect(appended.append)
    model.set_messages([user(0), reply(0)])
    assert model.rowCount() == 2 and model.row_of("a0") == 1 and model.row_of("nope") == -1
    model.append_message(reply(1, status="streaming", metrics={}))
    model.append_text("a1", "Hel")
    model.append_text("a1", "lo")
    assert model.item(2).content == "Answer **1** with some words.Hello"
    assert appended == [2, 2] and changes == []  # the streaming path is not a dataChanged
    assert model.index(1, 0).data(MessageRole.Item) is model.item(1)
    final = MessageItem("a1", "assistant", "Hello", "complete", "tiny-model", METRICS)
    model.update_message(final)
    assert model.item(2) is final
    assert "Hello" in model.index(2, 0).data(Qt.ItemDataRole.AccessibleTextRole)
    with pytest.raises(ValueError):
        model.append_message(final)
    model.remove_message("u0")
    assert model.row_of("a1") == 1 and model.rowCount() == 2


# --- long conversations ------------------------------------------------------------------


def test_five_thousand_messages_render_only_what_is_seen(qtbot: object) -> None:
    view = make_view(qtbot, chat(5000))
    delegate = view.message_delegate()
    assert view.model().rowCount() == 5000
    assert view.is_at_bottom()  # a chat opens on its newest message
    first_renders = delegate.render_count
    assert 0 < first_renders < 60, first_renders
    assert delegate.layout_count < 120
    view.grab()
    # Jump to the start: again only the rows around it are rendered.
    view.scroll_to_message("u0")
    qtbot.wait(50)  # type: ignore[attr-defined]
    view.grab()
    assert view.indexAt(QPoint(5, 5)).row() == 0
    assert delegate.render_count - first_renders < 60
    assert delegate.render_count < 120


def test_unseen_rows_have_estimated_heights_and_painted_rows_exact_ones(qtbot: object) -> None:
    view = make_view(qtbot, chat(400))
    delegate = view.message_delegate()
    top = view.model().index(0, 0)
    assert not delegate.is_laid_out(top)
    assert delegate.laid_height("u0") is not None  # an estimate is in the model
    bottom = view.model().index(399, 0)
    assert delegate.is_laid_out(bottom)
    assert view.visualRect(bottom).height() == delegate.laid_height("a199") == delegate.exact_height(bottom)


# --- streaming ---------------------------------------------------------------------------


def test_streaming_append_text_updates_the_row(qtbot: object) -> None:
    view = make_view(qtbot, chat(1000))
    model = view.conversation_model()
    model.append_message(MessageItem("live", "assistant", "", "streaming", "tiny-model", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    renders_before = view.message_delegate().render_count
    pieces = [f"word{i} " if i % 40 else "\n\n" for i in range(500)]
    for piece in pieces:
        model.append_text("live", piece)
    qtbot.wait(30)  # type: ignore[attr-defined]
    view.grab()
    item = model.item(model.row_of("live"))
    assert item.content == "".join(pieces)
    lay = view.message_delegate().layout_for(item)
    reply = view.message_delegate().docs.stream("live")
    assert reply.text == item.content
    reply.settle(item.content)  # the words the fast path placed, in the document's tail
    assert reply.stream.shown_text().endswith("word499 ")
    assert lay.status_label == "writing…"
    assert view.is_at_bottom()
    # Markdown renders during streaming are throttled, not one per append.
    assert view.message_delegate().render_count - renders_before < 20
    model.update_message(MessageItem("live", "assistant", item.content, "complete", "tiny-model", METRICS))
    qtbot.wait(30)  # type: ignore[attr-defined]
    final = view.message_delegate().layout_for(model.item(model.row_of("live")))
    assert final.status_label == "" and "TTFT" in final.metrics_text
    assert view.is_at_bottom()


def test_streaming_does_not_pull_a_person_who_scrolled_up(qtbot: object) -> None:
    view = make_view(qtbot, chat(200))
    model = view.conversation_model()
    model.append_message(MessageItem("live", "assistant", "", "streaming", "tiny-model", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    view.scroll_to_message("u50")
    qtbot.wait(30)  # type: ignore[attr-defined]
    anchor = view.indexAt(QPoint(5, 5)).row()
    for i in range(100):
        model.append_text("live", f"line {i}\n\n")
    qtbot.wait(50)  # type: ignore[attr-defined]
    assert not view.is_at_bottom()
    assert view.indexAt(QPoint(5, 5)).row() == anchor


# --- footer, status, actions ---------------------------------------------------------------


def test_metrics_line() -> None:
    line = metrics_line(METRICS)
    assert line == "TTFT 95 ms · prompt 21 tok at 410.2 tok/s · reply 48 tok at 61.0 tok/s · stop: end of reply"
    assert metrics_line({}) == ""
    assert metrics_line({"stop_reason": "length", "gen_tps": None}) == "stop: length limit"


def test_a_reply_from_a_server_is_marked_with_its_host() -> None:
    remote = {**METRICS, "remote": {"connection": "gpu-box", "host": "gpu-box.lan:8000", "kind": "vllm"}}
    assert metrics_line(remote) == "on gpu-box.lan:8000 · " + metrics_line(METRICS)
    assert metrics_line({"remote": {"host": ""}}) == ""  # no host, no mark
    cut = MessageItem(
        "r",
        "assistant",
        "some text",
        "interrupted",
        "m@gpu-box",
        remote,
        error="gpu-box.lan:8000 closed the connection in the middle of the reply; the text so far is kept.",
    )
    assert status_notice(cut) == (
        "Interrupted: gpu-box.lan:8000 closed the connection in the middle of the reply; the text so far is kept.",
        "warn",
    )
    quit_mid_reply = MessageItem("q", "assistant", "some text", "interrupted", "m", {})
    assert status_notice(quit_mid_reply) == ("Interrupted: Cove closed before this reply finished.", "warn")


def test_footer_shows_metrics_for_assistant_replies(qtbot: object) -> None:
    view = make_view(qtbot, [user(0), reply(0)])
    delegate = view.message_delegate()
    model = view.conversation_model()
    lay = delegate.layout_for(model.item(1))
    assert lay.header_text == "tiny-model"
    assert "TTFT 95 ms" in lay.metrics_text and "410.2 tok/s" in lay.metrics_text
    assert "61.0 tok/s" in lay.metrics_text and "48 tok" in lay.metrics_text
    assert "stop: end of reply" in lay.metrics_text
    assert not lay.metrics_rect.isNull()
    assert delegate.layout_for(model.item(0)).metrics_text == ""  # no footer on the person's own message
    assert not view.grab().isNull()


@pytest.mark.parametrize("status", ["cancelled", "interrupted", "length", "error"])
def test_unfinished_replies_are_marked_and_offer_retry(qtbot: object, status: str) -> None:
    item = reply(0, "partial", status=status, error="the engine stopped: out of memory" if status == "error" else None)
    view = make_view(qtbot, [user(0), item])
    lay = view.message_delegate().layout_for(item)
    assert lay.notice is not None and lay.status_label
    if status == "error":
        assert "out of memory" in lay.notice[0]
    kinds = [k for k, _ in actions_for(item)]
    assert "retry" in kinds and "regenerate" not in kinds
    with qtbot.waitSignal(view.retry_requested, timeout=1000) as signal:  # type: ignore[attr-defined]
        click_action(qtbot, view, "a0", "retry")
    assert signal.args == ["a0"]


def test_copy_regenerate_and_edit(qtbot: object) -> None:
    view = make_view(qtbot, [user(0, "my **question**"), reply(0, "the answer")])
    with qtbot.waitSignal(view.text_copied, timeout=1000) as copied:  # type: ignore[attr-defined]
        click_action(qtbot, view, "a0", "copy")
    assert copied.args == ["the answer"]
    assert QGuiApplication.clipboard().text() == "the answer"
    with qtbot.waitSignal(view.regenerate_requested, timeout=1000) as regen:  # type: ignore[attr-defined]
        click_action(qtbot, view, "a0", "regenerate")
    assert regen.args == ["a0"]
    with qtbot.waitSignal(view.edit_requested, timeout=1000) as edit:  # type: ignore[attr-defined]
        click_action(qtbot, view, "u0", "edit")
    assert edit.args == ["u0"]
    with qtbot.waitSignal(view.text_copied, timeout=1000) as copied_user:  # type: ignore[attr-defined]
        click_action(qtbot, view, "u0", "copy")
    assert copied_user.args == ["my **question**"]  # the raw text, not the rendering


def test_copy_code_block(qtbot: object) -> None:
    view = make_view(qtbot, [reply(0, "Run:\n\n```python\nprint('hi')\n```\n")])
    index = index_of(view, "a0")
    anchors = view.message_delegate().anchor_rects(index, view.visualRect(index))
    area = next(a for h, a in anchors if h == "cove-copy:0")
    with qtbot.waitSignal(view.text_copied, timeout=1000) as copied:  # type: ignore[attr-defined]
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=area.center())  # type: ignore[attr-defined]
    assert copied.args == ["print('hi')\n"]


def test_version_switcher(qtbot: object) -> None:
    first = reply(0, "first version", version_index=1, version_count=2)
    view = make_view(qtbot, [user(0), first])
    labels = [label for _k, label, _r in view.message_delegate().layout_for(first).actions]
    assert labels[:3] == ["‹", "1/2", "›"]
    regions = view.message_delegate().action_regions(index_of(view, "a0"), view.visualRect(index_of(view, "a0")))
    assert "version_prev" not in regions  # already the first version
    with qtbot.waitSignal(view.version_requested, timeout=1000) as nxt:  # type: ignore[attr-defined]
        click_action(qtbot, view, "a0", "version_next")
    assert nxt.args == ["a0", 1]
    view.conversation_model().update_message(reply(0, "second version", version_index=2, version_count=2))
    qtbot.wait(20)  # type: ignore[attr-defined]
    with qtbot.waitSignal(view.version_requested, timeout=1000) as prev:  # type: ignore[attr-defined]
        click_action(qtbot, view, "a0", "version_prev")
    assert prev.args == ["a0", -1]
    assert not any(k.startswith("version") for k, _ in actions_for(reply(1)))


def test_turns_the_model_no_longer_sees_are_marked(qtbot: object) -> None:
    old = user(0, "an old question", seen_by_model=False)
    view = make_view(qtbot, [old, reply(0), user(1)])
    lay = view.message_delegate().layout_for(old)
    assert not lay.not_seen_rect.isNull()
    assert view.message_delegate().layout_for(view.conversation_model().item(2)).not_seen_rect.isNull()


def test_clicks_on_text_emit_nothing(qtbot: object) -> None:
    view = make_view(qtbot, [user(0), reply(0)])
    emitted: list[object] = []
    for signal in (view.retry_requested, view.regenerate_requested, view.edit_requested, view.text_copied):
        signal.connect(emitted.append)
    rect = view.visualRect(index_of(view, "a0"))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # type: ignore[attr-defined]
    assert emitted == []


def test_keyboard_copy_and_accessibility(qtbot: object) -> None:
    view = make_view(qtbot, [user(0, "copy me"), reply(0)])
    assert view.accessibleName() == "Conversation"
    assert view.accessibleDescription()
    view.setFocus()
    view.setCurrentIndex(index_of(view, "u0"))
    with qtbot.waitSignal(view.text_copied, timeout=1000) as copied:  # type: ignore[attr-defined]
        qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)  # type: ignore[attr-defined]
    assert copied.args == ["copy me"]


def test_dark_palette_changes_the_rendering(qtbot: object) -> None:
    from PySide6.QtGui import QColor, QPalette

    view = make_view(qtbot, [reply(0, "```python\nx = 1\n```")])
    light_html = view.message_delegate().layout_for(view.conversation_model().item(0)).rendered.html
    palette = view.palette()
    palette.setColor(QPalette.ColorRole.Base, QColor("#1e1f22"))
    palette.setColor(QPalette.ColorRole.Text, QColor("#dfe1e5"))
    view.setPalette(palette)
    qtbot.wait(20)  # type: ignore[attr-defined]
    dark_html = view.message_delegate().layout_for(view.conversation_model().item(0)).rendered.html
    assert dark_html != light_html
    assert not view.grab().isNull()


def test_resize_relayouts_with_new_heights(qtbot: object) -> None:
    view = make_view(qtbot, [reply(0, "word " * 400)])
    index = index_of(view, "a0")
    wide = view.visualRect(index).height()
    view.resize(320, 600)
    qtbot.wait(120)  # type: ignore[attr-defined]
    view.grab()
    qtbot.wait(20)  # type: ignore[attr-defined]
    narrow = view.visualRect(index).height()
    assert narrow > wide
    assert narrow == view.message_delegate().exact_height(index)


# --- keeping the person's place ------------------------------------------------------------


def test_set_messages_keeps_the_place_of_a_person_who_scrolled_up(qtbot: object) -> None:
    items = chat(300)
    view = make_view(qtbot, items)
    view.scroll_to_message("u40")
    qtbot.wait(50)  # type: ignore[attr-defined]
    top = view.indexAt(QPoint(5, 5)).row()
    offset = view.visualRect(view.model().index(top, 0)).top()
    view.conversation_model().set_messages(list(items))  # e.g. a turn finished elsewhere
    qtbot.wait(50)  # type: ignore[attr-defined]
    assert view.indexAt(QPoint(5, 5)).row() == top
    assert view.visualRect(view.model().index(top, 0)).top() == offset
    # A version switch replaces a message by its sibling (another id) in the same place.
    swapped = list(items)
    swapped[top] = MessageItem("sibling", items[top].role, "the other version", "complete", None, {}, version_index=2, version_count=2)
    view.conversation_model().set_messages(swapped)
    qtbot.wait(50)  # type: ignore[attr-defined]
    assert view.indexAt(QPoint(5, 5)).row() == top
    assert not view.is_at_bottom()


def test_set_messages_at_the_bottom_stays_at_the_bottom(qtbot: object) -> None:
    items = chat(100)
    view = make_view(qtbot, items)
    assert view.is_at_bottom()
    view.conversation_model().set_messages(items + [user(99, "one more"), reply(99, "and its answer " * 50)])
    qtbot.wait(50)  # type: ignore[attr-defined]
    assert view.is_at_bottom()
    assert view.indexAt(view.viewport().rect().bottomLeft() + QPoint(5, -5)).row() == 101


def test_a_streamed_token_repaints_only_the_end_of_a_long_reply(qtbot: object) -> None:
    view = make_view(qtbot, chat(10))
    model = view.conversation_model()
    body = "".join(f"Paragraph {i} of a long reply.\n\n" for i in range(40))
    model.append_message(MessageItem("live", "assistant", body, "streaming", "tiny-model", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    view.grab()
    delegate = view.message_delegate()
    row = model.row_of("live")
    model.append_text("live", " more")  # no new line: the row keeps its height
    reply = delegate.docs.stream("live")
    assert reply.append(reply.text).rects == ()  # the view already took the change: nothing is left
    whole = delegate.layout_for(model.item(row)).height
    rects: list[QRect] = []  # in viewport coordinates, asked of the viewport or of the surface over the row
    live = view.reply_surface()

    def spy(widget: object, offset: object) -> None:
        original = widget.update  # type: ignore[attr-defined]

        def update(*args: object) -> None:
            if not args:
                rect = widget.rect()  # type: ignore[attr-defined]
            elif len(args) == 4:
                rect = QRect(*args)
            else:
                rect = args[0].boundingRect() if isinstance(args[0], QRegion) else args[0]
            rects.append(rect.translated(offset()))  # type: ignore[operator]
            original(*args)

        widget.update = update  # type: ignore[attr-defined]

    spy(view.viewport(), QPoint)
    spy(live, live.pos)
    model.append_text("live", " y")
    model.append_text("live", "z")
    assert reply.quick_frames > 0  # plain words: the fast path took at least one of the frames
    assert len(rects) == 2 and all(r.height() < whole / 4 for r in rects)
    row_rect = view.visualRect(model.index(row, 0))
    assert rects[1].left() > row_rect.left() + row_rect.width() // 10  # the end of the line, not all of it


def test_a_streaming_row_grows_a_few_lines_at_a_time_and_ends_exact(qtbot: object) -> None:
    # Every change of a row's height relayouts the list and repaints the whole viewport, so a
    # streaming row grows STREAM_GROW_LINES lines at once; when the reply ends it fits its text.
    from ui.conversation.row_layout import STREAM_GROW_LINES

    view = make_view(qtbot, chat(4))
    model = view.conversation_model()
    model.append_message(MessageItem("live", "assistant", "", "streaming", "tiny-model", {}))
    qtbot.wait(20)  # type: ignore[attr-defined]
    delegate = view.message_delegate()
    heights: list[int] = []
    lines = 24
    for i in range(lines):
        model.append_text("live", f"line {i}\n\n" if i < lines - 1 else f"line {i}")  # a paragraph at a time
        view.grab()
        heights.append(delegate.laid_height("live"))
    steps = [b - a for a, b in zip(heights, heights[1:]) if a != b]
    assert 0 < len(steps) < (lines - 1) * 2 // 3  # far fewer relayouts than lines
    assert min(steps) >= STREAM_GROW_LINES * delegate.layouter.line_spacing  # each one a whole step
    assert heights == sorted(heights)  # it only grows while streaming
    item = model.item(model.row_of("live"))
    model.update_message(MessageItem("live", "assistant", item.content, "complete", "tiny-model", METRICS))
    view.grab()
    done = delegate.layout_for(model.item(model.row_of("live")))
    assert delegate.laid_height("live") == done.height  # the exact height once it ended
    assert done.doc is not None and "line 23" in done.doc.toPlainText()


def test_painting_a_rect_outside_a_document_draws_nothing(qapp: object) -> None:
    # Regression: an empty clip reached Qt as "no clip" and the whole document was drawn.
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument

    from ui.conversation.text.document_paint import paint_document

    doc = QTextDocument()
    doc.setPlainText("some text that would leave ink\n" * 5)
    doc.setTextWidth(200)
    image = QImage(220, 400, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    below = QRectF(0, doc.size().height() + 50, 220, 30)
    paint_document(painter, doc, QPoint(0, 0), QColor("black"), below)
    painter.end()
    assert all(image.pixel(x, y) == 0 for x in range(0, 220, 3) for y in range(0, int(doc.size().height()), 3))
    painter = QPainter(image)
    paint_document(painter, doc, QPoint(0, 0), QColor("black"), QRectF(0, 0, 220, doc.size().height()))
    painter.end()
    assert any(image.pixel(x, y) != 0 for x in range(0, 220, 2) for y in range(0, int(doc.size().height()), 2))


def test_the_last_lines_of_a_reply_are_drawn_in_the_palette_text_colour(qapp: object) -> None:
    # The quick path that draws only the last paragraph's lines must use the given colour
    # (a dark palette's light text), not whatever pen the painter had.
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument

    from ui.conversation.text.document_paint import paint_document

    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setPlainText("first paragraph\nthe last paragraph, which streams")
    doc.setTextWidth(300)
    last_top = doc.documentLayout().blockBoundingRect(doc.lastBlock()).top()
    image = QImage(320, 80, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(QColor("black"))
    painter = QPainter(image)
    painter.setPen(QColor("black"))
    paint_document(painter, doc, QPoint(0, 0), QColor("white"), QRectF(0, last_top, 320, 30))
    painter.end()
    inked = [image.pixelColor(x, y) for x in range(320) for y in range(80) if image.pixelColor(x, y) != QColor("black")]
    assert inked and max(c.lightness() for c in inked) > 200
    assert all(image.pixelColor(x, y) == QColor("black") for x in range(320) for y in range(0, int(last_top) - 2))
