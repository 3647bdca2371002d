"""The Tools page driven as a person would (pytest-qt, offscreen): Add… shows the exact command
line and starts nothing; Test starts the server off the UI thread, lists its tools with their
descriptions and stops it; a server that cannot start is one sentence; Revoke forgets an
always-allow rule; Remove asks first; offline, Test asks before it starts anything."""

from __future__ import annotations

import shlex
from pathlib import Path

from PySide6.QtCore import Qt

from app.mcp.servers import stdio_server
from tests.ui.tools.conftest import WAIT_MS, children_running, fault_command, time_command


def _add(qtbot, page, name: str, command_line: str):
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    dialog = page.dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.keyClicks(dialog.name_field, name)
    qtbot.keyClicks(dialog.command_field, command_line)
    return dialog


def _test(qtbot, page, name: str) -> None:
    page.select(name)
    qtbot.mouseClick(page.test_button, Qt.MouseButton.LeftButton)


def test_add_shows_the_exact_command_line_and_starts_nothing(qtbot, page, hosts, tmp_path: Path) -> None:
    calls_file = tmp_path / "calls with space.txt"
    calls_file.write_text("")
    argv = fault_command(calls_file)
    assert page.empty.isVisible() and page.rows() == []
    dialog = _add(qtbot, page, "fault", shlex.join(argv))
    exact = shlex.join(argv)
    assert dialog.exact_line() == exact  # in full, quoted as it will run
    assert "Adding starts nothing" in dialog.preview_heading.text()
    assert f"({len(argv)} arguments)" in dialog.preview_heading.text()

    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    assert page.rows() == [("fault", exact)]
    assert page.details.identity.text() == exact
    assert "Nothing was started" in page.message_text()
    assert "cannot see what this server does on the network" in page.details.network_note.text()
    assert page.details.network_note.isVisible()
    assert hosts.made == []  # no MCP host, so no session and no process
    assert children_running(str(calls_file)) == []
    assert page.store.get("fault").command == tuple(argv)


def test_test_lists_the_fault_servers_tools_off_the_ui_thread_and_stops_it(qtbot, page, hosts, calls_file) -> None:
    page.add(stdio_server("fault", fault_command(calls_file)))
    _test(qtbot, page, "fault")
    # The click returned at once: the page says it is starting, and Test waits for this one.
    assert page.testing("fault")
    assert not page.test_button.isEnabled()
    assert "Starting the server" in page.details.status_text()

    qtbot.waitUntil(lambda: not page.testing("fault"), timeout=WAIT_MS)
    rows = dict(page.details.tool_rows())
    assert rows["echo"] == "Echo the text back."
    assert rows["crash"] == "Exit the process at once."
    assert set(rows) == {"echo", "env", "crash", "hang", "huge", "garbage"}
    assert page.details.status_text() == "It offers 6 tools (it was stopped again after the Test)."
    assert page.test_button.isEnabled()
    assert calls_file.read_text() == ""  # listing calls no tool
    qtbot.waitUntil(lambda: children_running(str(calls_file)) == [], timeout=WAIT_MS)


def test_test_lists_mcp_server_time(qtbot, page) -> None:
    dialog = _add(qtbot, page, "time", shlex.join(time_command()))
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    _test(qtbot, page, "time")
    assert page.testing("time")
    qtbot.waitUntil(lambda: not page.testing("time"), timeout=WAIT_MS)
    rows = dict(page.details.tool_rows())
    assert set(rows) == {"get_current_time", "convert_time"}
    assert "time" in rows["get_current_time"].lower()
    qtbot.waitUntil(lambda: children_running("mcp_server_time") == [], timeout=WAIT_MS)


def test_a_server_that_cannot_start_is_one_sentence(qtbot, page) -> None:
    page.add(stdio_server("broken", ["/nonexistent/cove-no-such-server", "--stdio"]))
    _test(qtbot, page, "broken")
    qtbot.waitUntil(lambda: not page.testing("broken"), timeout=WAIT_MS)
    text = page.details.status_text()
    assert text == "The tool server 'broken' could not start: '/nonexistent/cove-no-such-server' was not found."
    assert page.details.tool_rows() == []


def test_revoke_forgets_an_always_allow_rule(qtbot, page, calls_file) -> None:
    server = stdio_server("fault", fault_command(calls_file))
    page.add(server)
    page.store.remember(server, "echo")
    page.store.remember(server, "env")
    page.select("fault")
    assert page.details.always_allowed() == ["echo", "env"]
    assert not page.details.revoke_button.isEnabled()  # nothing selected yet

    page.details.rules.setCurrentRow(0)
    qtbot.mouseClick(page.details.revoke_button, Qt.MouseButton.LeftButton)
    assert page.store.rules(server) == ["env"]
    assert page.details.always_allowed() == ["env"]
    assert page.message_text() == "echo on fault is no longer always allowed: its calls are asked again."

    page.details.rules.setCurrentRow(0)
    qtbot.mouseClick(page.details.revoke_button, Qt.MouseButton.LeftButton)
    assert page.store.rules(server) == []
    assert page.details.rules_label.text().startswith("No tool is always allowed")


def test_remove_asks_first_and_takes_the_rules_with_it(qtbot, page, questions, calls_file) -> None:
    server = stdio_server("fault", fault_command(calls_file))
    page.add(server)
    page.store.remember(server, "echo")
    page.select("fault")
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert len(questions.asked) == 1 and server.identity in questions.asked[0][1]
    assert page.rows() == [("fault", server.identity)]  # answered no

    questions.answer = True
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert page.rows() == [] and page.store.find("fault") is None
    assert page.store.rules(server) == []
    assert page.message_text() == "Removed fault and its always-allow rules."


def test_offline_test_asks_before_starting_anything(qtbot, page, hosts, questions, cove_core, calls_file) -> None:
    page.add(stdio_server("fault", fault_command(calls_file)))
    cove_core.network.set_offline(True)
    page.refresh()
    assert page.offline_note.isVisible() and "Test asks before it starts" in page.offline_note.text()

    questions.answer = False
    _test(qtbot, page, "fault")
    assert len(questions.asked) == 1
    title, question = questions.asked[0]
    assert "offline" in title.lower() and "this once" in question and shlex.join(fault_command(calls_file)) in question
    assert page.message_text() == "fault was not started: Cove is offline."
    assert not page.testing("fault") and hosts.made == []
    assert children_running(str(calls_file)) == []

    questions.answer = True  # allow once
    _test(qtbot, page, "fault")
    assert len(questions.asked) == 2 and page.testing("fault")
    qtbot.waitUntil(lambda: not page.testing("fault"), timeout=WAIT_MS)
    assert "echo" in dict(page.details.tool_rows())

    questions.answer = False  # once meant once: the next Test asks again
    _test(qtbot, page, "fault")
    assert len(questions.asked) == 3 and not page.testing("fault")


def test_bad_input_in_the_add_dialog_is_one_sentence(qtbot, page, calls_file) -> None:
    dialog = _add(qtbot, page, "bad name!", "python -c 'print(1)")
    assert not dialog.add_button.isEnabled() and dialog.exact_line() == ""
    assert dialog.preview_heading.text().startswith("'bad name!' cannot name a tool server")
    dialog.name_field.setText("ok")
    assert dialog.preview_heading.text() == ("The command line cannot be read (No closing quotation): check its quotes.")
    dialog.command_field.setText("")
    assert dialog.preview_heading.text() == "Give the command line that starts the server."

    dialog.url_choice.setChecked(True)
    dialog.url_field.setText("http://example.com/mcp")
    assert dialog.preview_heading.text().startswith("'example.com' is not this machine")
    dialog.remote_box.setChecked(True)
    assert dialog.exact_line() == "http://example.com/mcp" and dialog.add_button.isEnabled()
    dialog.reject()

    page.add(stdio_server("fault", fault_command(calls_file)))
    dialog = _add(qtbot, page, "fault", "echo hi")
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible()
    assert dialog.result_text() == "A tool server named 'fault' exists already (cove tools remove fault first)."
