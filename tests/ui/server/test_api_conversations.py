"""Conversations API clients had are marked in the sidebar with their client ("editor · API"),
and a turn the window's server answers shows up there while the server is on."""

from __future__ import annotations

import socket

import httpx
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.serve.http.keys import ApiKeys
from app.serve.http.runner import ServerThread
from app.store.records import Conversation
from ui.chat.controller import ChatController
from ui.server.client_caption import CAPTION_ROLE, api_caption
from ui.server.control import ON
from ui.shell.main_window import MainWindow
from ui.shell.sidebar import Sidebar


def _conversation(cid: str, title: str, client: str | None) -> Conversation:
    return Conversation(
        id=cid,
        title=title,
        created_at="2026-01-01T00:00:00",
        updated_at=f"2026-01-01T00:00:0{cid}",
        model="tiny-llama",
        system_prompt=None,
        params={},
        pinned=False,
        message_count=2,
        client=client,
    )


def _ink(image, row_rect, x0: int, x1: int, background: QColor) -> int:
    """How many pixels of the row between x0 and x1 are not the background."""
    return sum(1 for x in range(x0, x1) for y in range(row_rect.top() + 2, row_rect.bottom() - 1) if image.pixelColor(x, y) != background)


def test_api_conversations_carry_their_client_caption(qtbot) -> None:
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    sidebar.resize(260, 400)
    sidebar.show()
    sidebar.set_conversations(
        [_conversation("3", "Refactor", "editor"), _conversation("2", "Poem", None), _conversation("1", "Curl test", "local API")]
    )
    items = [sidebar.conversation_list.item(r) for r in range(3)]
    assert [i.data(CAPTION_ROLE) for i in items] == ["editor · API", None, "local API"]
    assert items[0].data(Qt.ItemDataRole.AccessibleTextRole) == "Refactor (editor · API)"
    assert "From the API: editor" in items[0].toolTip() and "API" not in items[1].toolTip()

    image = sidebar.conversation_list.viewport().grab().toImage()
    background = image.pixelColor(image.width() - 2, image.height() - 2)  # below the rows
    captioned, plain = (sidebar.conversation_list.visualItemRect(i) for i in items[:2])
    right = (captioned.right() - 60, captioned.right() - 4)  # where the caption goes; short titles end far left of it
    assert _ink(image, captioned, *right, background) > 20
    assert _ink(image, plain, *right, background) == 0


def test_api_caption_names_the_client() -> None:
    assert api_caption("editor") == "editor · API"
    assert api_caption("local API") == "local API"


def test_a_turn_the_server_answers_joins_the_sidebar_under_its_client(qtbot, cove_core, fake_engine) -> None:
    key = ApiKeys(cove_core.db).add("editor")
    window = MainWindow(
        ChatController(cove_core, fake_engine),
        state_file=cove_core.paths.data_dir / "window.ini",
        presets_file=cove_core.paths.data_dir / "presets.json",
        server_factory=lambda p: ServerThread(cove_core.paths, port=p),
    )
    qtbot.addWidget(window)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        window.server.port = s.getsockname()[1]
    window.show()
    window.start()
    before = set(window.sidebar.conversation_ids())
    panel = window.server.open()
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.server.control.state == ON, timeout=30000)
    try:
        reply = httpx.post(
            f"{window.server.control.address}/chat/completions",
            timeout=60,
            headers={"Authorization": f"Bearer {key}"},
            json={"model": "tiny-llama", "max_tokens": 4, "messages": [{"role": "user", "content": "rename this function"}]},
        )
        assert reply.status_code == 200, reply.text

        def listed() -> list[str]:
            shown = window.sidebar.conversation_list
            rows = [shown.item(r) for r in range(shown.count())]
            return [i.text() for i in rows if i.data(CAPTION_ROLE) == "editor · API"]

        qtbot.waitUntil(lambda: listed() == ["rename this function"], timeout=10000)  # no click needed
        assert len(set(window.sidebar.conversation_ids()) - before) == 1
    finally:
        window.close()
        assert window.server.wait_stopped(30)
