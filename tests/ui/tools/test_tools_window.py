"""The Tools page from the main window: the sidebar's Tools entry opens it, it lists which
installed models can call tools (read off the UI thread), and quitting stops what a Test left."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.mcp.failures import ToolServerError
from app.mcp.servers import stdio_server
from tests.support.remote_window import make_window
from tests.support.tiny_model import write_tiny_gguf
from tests.ui.tools.conftest import WAIT_MS

HERMES_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>{}</tool_call>{% endif %}"
)


def test_the_sidebar_opens_the_tools_page_with_the_tool_capable_models(qtbot, cove_core, fake_engine, tmp_path: Path) -> None:
    capable = write_tiny_gguf(tmp_path / "tiny-hermes.gguf", chat_template=HERMES_TEMPLATE)
    model = cove_core.library.import_file(capable)
    window = make_window(qtbot, cove_core, fake_engine)
    assert window.tools.button.isVisible()
    qtbot.mouseClick(window.tools.button, Qt.MouseButton.LeftButton)
    panel = window.tools.panel
    assert panel is not None and panel.isVisible()
    page = panel.page
    assert page.empty.isVisible()
    qtbot.waitUntil(lambda: "(hermes)" in page.models_label.text(), timeout=WAIT_MS)
    text = page.models_label.text()
    assert f"{model.name} (hermes)" in text
    assert "tiny-llama" not in text  # no template: it does not know tools
    assert window.tools.mcp is None  # opening the page started nothing


def test_quitting_stops_the_host_a_test_made(qtbot, cove_core, fake_engine, calls_file) -> None:
    from tests.ui.tools.conftest import fault_command

    window = make_window(qtbot, cove_core, fake_engine)
    page = window.tools.open().page
    page.add(stdio_server("fault", fault_command(calls_file)))
    page.select("fault")
    qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.testing("fault"), timeout=WAIT_MS)
    host = window.tools.mcp
    assert host is not None
    window.close()
    assert window.tools.mcp is None
    with pytest.raises(ToolServerError, match="Cove is stopping"):  # the host was closed at quit: it starts nothing now
        host.list_tools(stdio_server("fault", fault_command(calls_file)))


def test_the_call_limits_are_set_on_the_page_kept_and_taken_by_the_live_host(qtbot, cove_core, fake_engine) -> None:
    from app.mcp.results import ToolLimits

    window = make_window(qtbot, cove_core, fake_engine)
    try:
        host = window.tools.host()  # the host a conversation's calls would use
        assert host.limits == ToolLimits(60.0, 20_000)
        row = window.tools.open().limits
        assert row is not None and row.isVisible()
        row.timeout.setValue(5)
        row.chars.setValue(1_500)
        row.chars.editingFinished.emit()
        assert cove_core.tool_limits() == ToolLimits(5.0, 1_500)  # kept in the settings file
        assert host.limits == ToolLimits(5.0, 1_500)  # and the next call of this window takes them
    finally:
        window.close()
    again = make_window(qtbot, cove_core, fake_engine)  # a restart shows what was kept
    try:
        row = again.tools.open().limits
        assert row is not None and (row.timeout.value(), row.chars.value()) == (5, 1_500)
    finally:
        again.close()
