"""A hostile tool server cannot make the window's questions read backwards or hide a part of them
(pytest-qt, offscreen): the approval dialog, the Tools page's Test (tools, descriptions, failure
sentence, always-allow rules) and a turn's notes show control, bidirectional and invisible
characters as escapes, the dialog's arguments as JSON that still decodes exactly. The server is
real (tests/support/hostile_tool_server.py, on stdio)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.mcp.approval import ToolRequest
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.servers import ToolServer, stdio_server
from tests.support.hostile_tool_server import DESCRIPTION, HOSTILE, NAMED_TOOL, RAW
from tests.ui.tools.conftest import WAIT_MS

SERVER = Path(__file__).parents[2] / "support" / "hostile_tool_server.py"
# What a window obeys or draws as nothing: RAW, and the bidi marks, zero width space and a tag character.
HIDDEN = (*RAW, "\u200f", "\u061c", "\u200b", "\U000e0041")
ARGUMENTS = {"path": "/home/me/\u202etxt.exe", "why": "\u2066ok\u2069 \u200f1, 2\u200f \U000e0041 \x9b2J \x1b]0;x\x07"}


def _hidden(text: str) -> list[str]:
    return [ch.encode("unicode_escape").decode("ascii") for ch in HIDDEN if ch in text]


def _shown(text: str) -> str:
    """`text` as the window shows it (written out here, not taken from Cove)."""
    for ch, escape in (
        ("\x1b", "\\x1b"),
        ("\x07", "\\x07"),
        ("\x9b", "\\x9b"),
        ("\u202e", "\\u202e"),
        ("\u2066", "\\u2066"),
        ("\u2069", "\\u2069"),
    ):
        text = text.replace(ch, escape)
    return text


def _server(tmp_path: Path, mode: str = "serve") -> ToolServer:
    calls = tmp_path / "calls.txt"
    calls.touch()
    return stdio_server("hostile", [sys.executable, str(SERVER), str(calls), mode])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[McpHost]:
    with McpHost(tmp_path / "logs" / "tool-servers.log", ToolLimits(call_timeout_s=20, result_cap_chars=1000)) as made:
        yield made


def test_the_approval_dialog_shows_hidden_characters_as_escapes(qtbot, tmp_path: Path, host: McpHost) -> None:
    from ui.tools.approval_dialog import ToolApprovalDialog

    server = _server(tmp_path)
    [tool] = [t.name for t in host.list_tools(server) if t.name == NAMED_TOOL]  # the name as the server gave it
    dialog = ToolApprovalDialog("c1", ToolRequest(server, tool, ARGUMENTS))
    qtbot.addWidget(dialog)
    dialog.show()

    for part in (dialog.heading.text(), dialog.identity.text(), dialog.arguments.toPlainText(), dialog.always_button.toolTip()):
        assert not _hidden(part), (_hidden(part), part)
    assert f"<b>{_shown(NAMED_TOOL)}</b>" in dialog.heading.text()
    shown = dialog.arguments.toPlainText()
    assert '"path": "/home/me/\\u202etxt.exe"' in shown
    assert '"why": "\\u2066ok\\u2069 \\u200f1, 2\\u200f \\udb40\\udc41 \\u009b2J \\u001b]0;x\\u0007"' in shown
    assert json.loads(shown) == ARGUMENTS  # what is shown still reads as exactly these arguments
    assert dialog.deny_button.isDefault()


def test_a_tool_asked_about_again_says_why_in_the_dialog_and_on_the_terminal(qtbot, tmp_path: Path) -> None:
    """A tool "always" allowed whose program changed is asked about again, and the question says why."""
    import io

    from app.cli.tools_cmd import describe_request
    from ui.tools.approval_dialog import ToolApprovalDialog

    why = 'You chose "always" for this tool before, but /srv/\u202esrv.py has changed since.'
    request = ToolRequest(_server(tmp_path), NAMED_TOOL, {}, asked_again=why)
    dialog = ToolApprovalDialog("c1", request)
    qtbot.addWidget(dialog)
    assert dialog.asked_again.isVisibleTo(dialog) and dialog.asked_again.text() == _shown(why)
    plain = ToolApprovalDialog("c2", ToolRequest(_server(tmp_path), NAMED_TOOL, {}))
    qtbot.addWidget(plain)
    assert not plain.asked_again.isVisibleTo(plain)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    asked = describe_request(request, Terminal())
    assert asked.startswith(why.replace("\u202e", "\\u202e") + "\n") and "\u202e" not in asked


def test_the_tools_page_shows_what_the_server_wrote_as_escapes(qtbot, page, tmp_path: Path) -> None:
    server = _server(tmp_path)
    page.add(server)
    page.select("hostile")
    qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.testing("hostile"), timeout=WAIT_MS)
    rows = dict(page.details.tool_rows())
    assert rows[_shown(NAMED_TOOL)] == _shown(DESCRIPTION)
    assert rows["fail"] == f"Fails. {_shown(HOSTILE)}"
    for i in range(page.details.tools.topLevelItemCount()):
        item = page.details.tools.topLevelItem(i)
        assert not _hidden(item.text(0) + item.text(1) + item.toolTip(1)), (item.text(0), item.text(1))

    # An always-allow rule kept for that tool is listed escaped, and Revoke forgets the rule itself.
    page.store.remember(server, NAMED_TOOL)
    page.select("hostile")
    assert page.details.always_allowed() == [_shown(NAMED_TOOL)]
    page.details.rules.setCurrentRow(0)
    qtbot.mouseClick(page.details.revoke_button, Qt.MouseButton.LeftButton)
    assert page.store.rules(server) == []
    assert not _hidden(page.message_text()) and _shown(NAMED_TOOL) in page.message_text()


def test_a_server_that_refuses_is_one_escaped_sentence_on_the_page_and_in_a_turn(
    qtbot, page, cove_core, tmp_path: Path, host: McpHost
) -> None:
    from ui.tools.chat_tools import PARAMS_KEY, ChatTools

    server = _server(tmp_path, "refuse-list")
    page.add(server)
    page.select("hostile")
    qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.testing("hostile"), timeout=WAIT_MS)
    status = page.details.status_text()
    assert f"no tools for you: {_shown(HOSTILE)}" in status and not _hidden(status), status

    tools = ChatTools(page.store, cove_core.network, lambda: host, confirm=lambda *_: True)
    conversation = cove_core.history.create_conversation(params={PARAMS_KEY: ["hostile"]})
    build = tools.loop_for(conversation)
    assert build is not None and build() is None  # no tool offered
    [note] = list(tools.notes)
    assert f"no tools for you: {_shown(HOSTILE)}" in note and not _hidden(note), note
