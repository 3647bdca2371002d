"""A reply's reasoning in the conversation view: "Thinking… N s" collapsed above the answer while it
streams, "Thought for N s" once answered or read back from the history, opened by a click or by
Enter/Space, shown as plain text, and never part of the answer the row copies."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.store.history import Message
from tests.support.streaming_view import streaming_view
from ui.chat.shown_messages import ShownMessage
from ui.conversation.item_model import MessageItem
from ui.conversation.reasoning_rows import ReasoningShown, finished_reasoning, reasoning_of, visible_text
from ui.conversation.row_layout import metrics_line
from ui.conversation.view import ConversationView
from ui.shell.main_window import to_item


def stored(reasoning: str, metrics: dict[str, Any] | None = None, role: str = "assistant") -> Message:
    """A reply as the history gives it back."""
    return Message(
        id="a",
        conversation_id="c",
        parent_id="u",
        role=role,
        content="About 40 km.",
        status="complete",
        error=None,
        created_at="",
        updated_at="",
        model_name="m",
        model_sha256=None,
        model_quant=None,
        params={},
        metrics=metrics or {},
        seq=2,
        reasoning=reasoning,
    )


def thinking_view(qtbot: Any) -> tuple[ConversationView, list[float]]:
    """A view with a reply streaming into it, and the clock its seconds are read from."""
    view, _model = streaming_view(qtbot)
    now = [100.0]
    view.thinking_clock.clock = lambda: now[0]
    return view, now


def live(view: ConversationView) -> MessageItem:
    model = view.conversation_model()
    return model.item(model.row_of("live"))


def line_center(view: ConversationView, message_id: str, part: str = "line") -> QPoint:
    model = view.conversation_model()
    index = model.index(model.row_of(message_id), 0)
    view.scrollTo(index)
    lay = view.message_delegate().layout_for(model.item(index.row()))
    assert lay.reasoning is not None
    return view.visualRect(index).topLeft() + getattr(lay.reasoning, part).center()


def accessible(view: ConversationView, message_id: str, role: Qt.ItemDataRole = Qt.ItemDataRole.AccessibleTextRole) -> str:
    model = view.conversation_model()
    return model.index(model.row_of(message_id), 0).data(role)


def test_streamed_reasoning_shows_thinking_collapsed_and_the_answer_stays_apart(qtbot: Any) -> None:
    view, now = thinking_view(qtbot)
    now[0] = 100.4
    view.append_reasoning("live", "The user asks about ", 100.0)
    view.append_reasoning("live", "the sea.", 100.3)
    item = live(view)
    assert item.content == ""  # the answer has no word of the reasoning
    assert item.reasoning.text == "The user asks about the sea." and not item.reasoning.expanded
    lay = view.message_delegate().layout_for(item)
    assert lay.reasoning is not None and lay.reasoning.label == "Thinking… 0 s"
    assert lay.reasoning.doc is None  # collapsed: the text is not laid out
    assert lay.status_label == ""  # no "writing…" beside the speaker while its line says it thinks
    assert "Thinking… 0 s, collapsed" in accessible(view, "live")
    assert "asks about" not in accessible(view, "live")
    assert "shows the model's thinking" in accessible(view, "live", Qt.ItemDataRole.AccessibleDescriptionRole)

    view.end_reasoning("live", 14_200.0)  # the answer begins
    view.conversation_model().append_text("live", "The sea is ")
    view.conversation_model().append_text("live", "wide.")
    qtbot.wait(30)
    item = live(view)
    assert item.content == "The sea is wide." and item.reasoning.label == "Thought for 14 s"
    lay = view.message_delegate().layout_for(item)
    assert lay.reasoning is not None and lay.doc_top > lay.reasoning.line.bottom()  # the answer sits under the line
    assert view.reply_surface().geometry().top() >= view.visualRect(view.model().index(1, 0)).top() + lay.doc_top

    model = view.conversation_model()
    done = MessageItem(
        "live",
        "assistant",
        item.content,
        "complete",
        "m",
        {"gen_tokens": 30, "reasoning_ms": 14_200},
        reasoning=finished_reasoning(item.reasoning, stored("The user asks about the sea.", {"reasoning_ms": 14_200})),
    )
    model.update_message(done)
    qtbot.wait(30)
    copies: list[str] = []
    view.text_copied.connect(copies.append)
    index = model.index(model.row_of("live"), 0)
    regions = view.message_delegate().action_regions(index, view.visualRect(index))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=regions["copy"].center())
    assert copies == ["The sea is wide."] and QGuiApplication.clipboard().text() == "The sea is wide."
    view.setCurrentIndex(index)
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert copies[-1] == "The sea is wide."


def test_the_seconds_move_while_it_thinks_and_stop_once_it_answers(qtbot: Any) -> None:
    view, now = thinking_view(qtbot)
    view.append_reasoning("live", "Hmm.", 100.0)
    assert live(view).reasoning.label == "Thinking… 0 s"
    assert view.thinking_clock.timer.isActive()
    now[0] = 103.4  # no new reasoning: the timer alone moves the seconds
    qtbot.waitUntil(lambda: live(view).reasoning.label == "Thinking… 3 s", timeout=3000)
    assert view.message_delegate().layout_for(live(view)).reasoning.label == "Thinking… 3 s"
    assert "Thinking… 3 s" in accessible(view, "live")
    now[0] = 165.0
    qtbot.waitUntil(lambda: live(view).reasoning.label == "Thinking… 1 min 5 s", timeout=3000)

    view.end_reasoning("live", 65_000.0)
    assert live(view).reasoning.label == "Thought for 1 min 5 s"
    now[0] = 170.0
    qtbot.waitUntil(lambda: not view.thinking_clock.timer.isActive(), timeout=3000)
    assert view.thinking_clock.watching == frozenset()
    assert live(view).reasoning.label == "Thought for 1 min 5 s"  # the clock no longer moves it


def test_a_click_opens_the_reasoning_and_copy_thinking_copies_it(qtbot: Any) -> None:
    view, now = thinking_view(qtbot)
    text = "First, the tides.\nThen the currents, which move heat around the planet."
    view.append_reasoning("live", text, 100.0)
    view.end_reasoning("live", 2_000.0)
    view.conversation_model().append_text("live", "Tides and currents.")
    qtbot.wait(30)
    collapsed = view.message_delegate().layout_for(live(view)).height

    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=line_center(view, "live"))
    item = live(view)
    assert item.reasoning.expanded and item.content == "Tides and currents."
    lay = view.message_delegate().layout_for(item)
    assert lay.reasoning is not None and lay.reasoning.doc is not None
    assert lay.reasoning.doc.toPlainText() == text
    assert lay.height > collapsed and lay.doc_top > lay.reasoning.text.bottom()
    assert "shown" in accessible(view, "live")

    view.append_reasoning("live", " And the wind.", 101.0)  # open while it still grows: the text follows
    lay = view.message_delegate().layout_for(live(view))
    assert lay.reasoning is not None and lay.reasoning.doc is not None
    assert lay.reasoning.doc.toPlainText() == text + " And the wind."

    copies: list[str] = []
    view.text_copied.connect(copies.append)
    qtbot.wait(30)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=line_center(view, "live", "copy"))
    assert copies == [text + " And the wind."]

    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=line_center(view, "live"))
    assert not live(view).reasoning.expanded
    assert view.message_delegate().layout_for(live(view)).reasoning.doc is None


def test_enter_and_space_open_and_close_the_current_replys_reasoning(qtbot: Any) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.resize(640, 480)
    view.conversation_model().set_messages(
        [
            MessageItem("u", "user", "Why?", "complete", None, {}),
            MessageItem("a", "assistant", "Because.", "complete", "m", {}, reasoning=ReasoningShown("Let me see.")),
        ]
    )
    view.show()
    qtbot.waitExposed(view)
    view.setFocus()
    view.setCurrentIndex(view.model().index(1, 0))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert view.conversation_model().item(1).reasoning.expanded
    qtbot.keyClick(view, Qt.Key.Key_Space)
    assert not view.conversation_model().item(1).reasoning.expanded
    view.setCurrentIndex(view.model().index(0, 0))  # a row without reasoning: nothing to open
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert view.conversation_model().item(0).reasoning is None


def test_a_reply_from_the_history_with_reasoning_shows_thought_for(qtbot: Any) -> None:
    message = stored("I should check the units first.", {"reasoning_ms": 14_400, "gen_tokens": 90})
    shown = reasoning_of(message)
    assert shown is not None and shown.label == "Thought for 14 s" and not shown.expanded and not shown.live
    assert reasoning_of(stored("", {"reasoning_ms": 300})) is None  # no reasoning, no line
    assert reasoning_of(stored("words", role="user")) is None
    assert reasoning_of(stored("quick", {"reasoning_ms": 300})).label == "Thought for less than a second"
    assert reasoning_of(stored("older", {})).label == "Thought before answering"  # no time recorded

    view = ConversationView()
    qtbot.addWidget(view)
    view.resize(640, 480)
    view.conversation_model().set_messages(
        [
            MessageItem("u", "user", "How far is it?", "complete", None, {}),
            to_item(ShownMessage(message, 1, 1, True)),  # as the window reads a reply from the history
        ]
    )
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(30)
    lay = view.message_delegate().layout_for(view.conversation_model().item(1))
    assert lay.reasoning is not None and lay.reasoning.label == "Thought for 14 s" and not lay.reasoning.expanded
    assert lay.status_label == ""
    assert "Thought for 14 s, collapsed" in accessible(view, "a") and "units" not in accessible(view, "a")
    # Painted: the row's measured height is the one the list placed it with.
    assert view.message_delegate().laid_height("a") == lay.height


def test_a_reply_without_reasoning_shows_no_line(qtbot: Any) -> None:
    view, _now = thinking_view(qtbot)
    view.conversation_model().append_text("live", "Straight to the answer.")
    qtbot.wait(30)
    item = live(view)
    lay = view.message_delegate().layout_for(item)
    assert item.reasoning is None and lay.reasoning is None and lay.status_label == "writing…"
    header = view.message_delegate().layout_for(item).header
    assert lay.doc_top == header.bottom() + 1 + 6  # the answer right under the speaker, as before
    assert "Thinking" not in accessible(view, "live") and "Thought" not in accessible(view, "live")
    assert not view.thinking_clock.timer.isActive()
    assert not view.toggle_reasoning("live")
    view.append_reasoning("nobody", "text", 100.0)  # a reply that is not shown: nothing happens
    assert not view.thinking_clock.timer.isActive()


def test_hostile_reasoning_is_shown_as_text(qtbot: Any) -> None:
    hostile = (
        '<img src="http://attacker.example/x.png"><b>bold</b> <a href="file:///etc/passwd">link</a> '
        "\u202eevil\u202c \u2067isolate\u2069 \x1b[2J end"
    )
    view, _now = thinking_view(qtbot)
    view.append_reasoning("live", hostile, 100.0)
    view.end_reasoning("live", 1_500.0)
    view.conversation_model().append_text("live", "Fine.")
    assert view.toggle_reasoning("live")
    qtbot.wait(30)
    lay = view.message_delegate().layout_for(live(view))
    assert lay.reasoning is not None and lay.reasoning.doc is not None
    shown = lay.reasoning.doc.toPlainText()
    assert '<img src="http://attacker.example/x.png"><b>bold</b>' in shown  # the tags as written
    assert "\\u202eevil\\u202c" in shown and "\\u2067isolate\\u2069" in shown and "\\x1b[2J" in shown
    assert not any(ch in shown for ch in "\u202e\u202c\u2067\u2069\x1b")
    assert lay.reasoning.doc.refused == [] and view.message_delegate().refused_loads == []  # nothing loaded
    assert not lay.reasoning.doc.toHtml().count("<img")  # an image element would be an <img> in the HTML
    assert lay.reasoning.label == "Thought for 2 s"
    view.grab()  # painted with it open
    assert live(view).content == "Fine."


def test_visible_text_keeps_words_and_shows_controls() -> None:
    assert visible_text("plain words, مرحبا, 中文\n\tnext") == "plain words, مرحبا, 中文\n\tnext"
    assert visible_text("a\u202eb\rc\u200fd") == "a\\u202eb\\rc\\u200fd"


def test_the_reply_figures_count_the_answer_apart_from_the_thinking() -> None:
    figures = {"gen_tokens": 412, "gen_tps": 38.5, "reasoning_tokens": 400, "reasoning_ms": 14_200}
    assert "reply 12 tok + thinking 400 tok at 38.5 tok/s" in metrics_line(figures)
    assert "reply 48 tok at 61.0 tok/s" in metrics_line({"gen_tokens": 48, "gen_tps": 61.0})  # no thinking: as before


def test_enter_opens_a_tool_rows_details_too(qtbot: Any) -> None:
    from ui.conversation.tool_rows import ToolShown

    view = ConversationView()
    qtbot.addWidget(view)
    view.resize(640, 480)
    tool = ToolShown("Called time/now · done", "**Arguments**\n\n```json\n{}\n```")
    view.conversation_model().set_messages([MessageItem("t", "tool_call", tool.line, "complete", "Tool", {}, tool=tool)])
    view.show()
    qtbot.waitExposed(view)
    view.setFocus()
    view.setCurrentIndex(view.model().index(0, 0))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert view.conversation_model().item(0).tool.expanded and "Arguments" in view.conversation_model().item(0).content
    qtbot.keyClick(view, Qt.Key.Key_Space)
    assert not view.conversation_model().item(0).tool.expanded
