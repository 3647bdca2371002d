"""Sidebar: list order and selection, debounced search, search results, per-conversation menu."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from app.store.history import Conversation
from app.store.search import SearchHit
from ui.shell.sidebar import SEARCH_DEBOUNCE_MS, Sidebar, snippet_html


def conv(cid: str, title: str | None, updated: str, pinned: bool = False) -> Conversation:
    return Conversation(
        id=cid,
        title=title,
        created_at=updated,
        updated_at=updated,
        model="tiny",
        system_prompt=None,
        params={},
        pinned=pinned,
        message_count=2,
    )


CONVERSATIONS = [
    conv("old", "Oldest chat", "2025-01-01T10:00:00.000Z"),
    conv("new", "Newest chat", "2025-03-01T10:00:00.000Z"),
    conv("pin-old", "Pinned long ago", "2024-12-01T10:00:00.000Z", pinned=True),
    conv("mid", None, "2025-02-01T10:00:00.000Z"),
    conv("pin-new", "Pinned recently", "2025-02-15T10:00:00.000Z", pinned=True),
]


@pytest.fixture
def sidebar(qtbot) -> Sidebar:
    widget = Sidebar()
    qtbot.addWidget(widget)
    widget.resize(280, 500)
    widget.show()
    widget.set_conversations(CONVERSATIONS)
    return widget


def test_pinned_first_then_newest_first(sidebar: Sidebar) -> None:
    assert sidebar.conversation_ids() == ["pin-new", "pin-old", "new", "mid", "old"]
    texts = [sidebar.conversation_list.item(i).text() for i in range(sidebar.conversation_list.count())]
    assert texts[3] == "Untitled chat"
    pinned_icon = sidebar.conversation_list.item(0).icon().pixmap(14, 14).toImage()
    plain_icon = sidebar.conversation_list.item(2).icon().pixmap(14, 14).toImage()
    assert pinned_icon != plain_icon  # the pin mark is drawn only on pinned rows
    assert sidebar.conversation_list.item(0).data(Qt.ItemDataRole.AccessibleTextRole).startswith("Pinned")


def test_clicking_a_conversation_emits_but_select_does_not(qtbot, sidebar: Sidebar) -> None:
    chosen: list[str] = []
    sidebar.conversation_selected.connect(chosen.append)
    sidebar.select_conversation("mid")
    assert sidebar.selected_conversation() == "mid"
    sidebar.set_conversations(CONVERSATIONS)  # a refresh keeps the selection, silently
    assert sidebar.selected_conversation() == "mid"
    assert chosen == []
    rect = sidebar.conversation_list.visualItemRect(sidebar.conversation_list.item(2))
    qtbot.mouseClick(sidebar.conversation_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert chosen == ["new"]


def test_new_chat_button_emits(qtbot, sidebar: Sidebar) -> None:
    with qtbot.waitSignal(sidebar.new_chat_requested, timeout=1000):
        qtbot.mouseClick(sidebar.new_chat_button, Qt.MouseButton.LeftButton)


def test_search_is_debounced_and_emits_once(qtbot, sidebar: Sidebar) -> None:
    queries: list[str] = []
    sidebar.search_changed.connect(queries.append)
    qtbot.keyClicks(sidebar.search_box, "llama  ")  # each key restarts the debounce timer
    assert queries == []
    qtbot.waitUntil(lambda: queries == ["llama"], timeout=SEARCH_DEBOUNCE_MS * 10)
    qtbot.wait(SEARCH_DEBOUNCE_MS * 2)
    assert queries == ["llama"]


def test_results_show_title_and_bold_matches_and_click_emits_ids(qtbot, sidebar: Sidebar) -> None:
    sidebar.search_box.setText("cats")
    hits = [
        SearchHit("m1", "new", "Newest chat", "user", "I like [cats] & <dogs>", "2025-03-01T10:00:00Z"),
        SearchHit("m2", "mid", None, "assistant", "…about [cats]…", "2025-02-01T10:00:00Z"),
    ]
    sidebar.show_search_results(hits)
    assert sidebar.is_showing_results()
    assert sidebar.results_list.count() == 2
    first = sidebar.results_list.item(0)
    html_text = first.data(Qt.ItemDataRole.UserRole + 2)
    assert "<b>Newest chat</b>" in html_text and "<b>cats</b>" in html_text
    assert "&lt;dogs&gt;" in html_text and "&amp;" in html_text  # snippet text is escaped
    assert sidebar.results_list.item(1).data(Qt.ItemDataRole.AccessibleTextRole).startswith("Untitled chat: ")

    with qtbot.waitSignal(sidebar.search_result_chosen, timeout=1000) as blocker:
        rect = sidebar.results_list.visualItemRect(sidebar.results_list.item(1))
        qtbot.mouseClick(sidebar.results_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == ["mid", "m2"]


def test_clearing_the_search_returns_to_the_list(qtbot, sidebar: Sidebar) -> None:
    queries: list[str] = []
    sidebar.search_changed.connect(queries.append)
    sidebar.search_box.setText("x")
    sidebar.show_search_results([])
    assert sidebar.is_showing_results()
    assert "No messages match" in sidebar.results_list.item(0).data(Qt.ItemDataRole.UserRole + 2)
    qtbot.keyClick(sidebar.search_box, Qt.Key.Key_Escape)
    assert sidebar.search_text() == ""
    assert not sidebar.is_showing_results()
    sidebar.show_search_results([SearchHit("m", "new", "t", "user", "x", "z")])  # late: ignored
    assert not sidebar.is_showing_results()
    qtbot.wait(SEARCH_DEBOUNCE_MS * 2)
    assert queries == []  # the pending search was dropped with the text


def test_snippet_markers_become_bold() -> None:
    assert snippet_html("a [b] c [d") == "a <b>b</b> c <b>d</b>"
    assert snippet_html("x] <y>") == "x] &lt;y&gt;"


def _action(menu, text_start: str):
    return next(a for a in menu.actions() if a.text().startswith(text_start))


def test_context_menu_actions_emit_requests(qtbot, sidebar: Sidebar) -> None:
    pins: list[tuple[str, bool]] = []
    exports: list[tuple[str, str]] = []
    deletes: list[str] = []
    sidebar.pin_requested.connect(lambda cid, pinned: pins.append((cid, pinned)))
    sidebar.export_requested.connect(lambda cid, fmt: exports.append((cid, fmt)))
    sidebar.delete_requested.connect(deletes.append)

    menu = sidebar.context_menu("new")
    assert [a.text() for a in menu.actions() if a.text()] == [
        "Rename…",
        "Pin to top",
        "Export as Markdown…",
        "Export as JSON…",
        "Delete…",
    ]
    _action(menu, "Pin").trigger()
    _action(menu, "Export as Markdown").trigger()
    _action(menu, "Export as JSON").trigger()
    _action(menu, "Delete").trigger()
    _action(sidebar.context_menu("pin-old"), "Unpin").trigger()
    assert pins == [("new", True), ("pin-old", False)]
    assert exports == [("new", "md"), ("new", "json")]
    assert deletes == ["new"]


def test_rename_inline_emits_new_title(qtbot, sidebar: Sidebar) -> None:
    renames: list[tuple[str, str]] = []
    sidebar.rename_requested.connect(lambda cid, title: renames.append((cid, title)))
    _action(sidebar.context_menu("old"), "Rename").trigger()
    editor = sidebar.conversation_list.viewport().findChild(QLineEdit)
    assert editor is not None and editor.text() == "Oldest chat"
    editor.setText("  A   better title ")
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # the delegate commits on a queued call
    qtbot.waitUntil(lambda: renames == [("old", "A better title")], timeout=1000)


def test_rename_to_blank_or_same_emits_nothing(qtbot, sidebar: Sidebar) -> None:
    renames: list[tuple[str, str]] = []
    sidebar.rename_requested.connect(lambda cid, title: renames.append((cid, title)))
    sidebar.begin_rename("old")
    editor = sidebar.conversation_list.viewport().findChild(QLineEdit)
    editor.setText("   ")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: sidebar.conversation_list.state() != sidebar.conversation_list.State.EditingState, timeout=1000)
    assert renames == []
    assert sidebar.conversation_list.item(4).text() == "Oldest chat"


def test_keyboard_delete_and_f2(qtbot, sidebar: Sidebar) -> None:
    deletes: list[str] = []
    sidebar.delete_requested.connect(deletes.append)
    sidebar.select_conversation("mid")
    qtbot.keyClick(sidebar.conversation_list, Qt.Key.Key_Delete)
    assert deletes == ["mid"]
    qtbot.keyClick(sidebar.conversation_list, Qt.Key.Key_F2)
    assert sidebar.conversation_list.viewport().findChild(QLineEdit) is not None


def test_every_control_has_an_accessible_name(sidebar: Sidebar) -> None:
    for widget in (sidebar.new_chat_button, sidebar.search_box, sidebar.conversation_list, sidebar.results_list):
        assert widget.accessibleName()
