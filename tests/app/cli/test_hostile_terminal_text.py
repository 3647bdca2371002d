"""A hostile tool server cannot steer the terminal: `cove tools list`, `cove tools call` (its result,
the approval question, the denial, the server's error sentences) and the lines `cove chat --tools`
prints for a call show what the server wrote through the terminal-text rule on a real pty, while
a pipe gets the exact text. The server is real (tests/support/hostile_tool_server.py, on stdio)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.cli import assert_clean_error, cove
from tests.support.hostile_tool_server import DESCRIPTION, HOSTILE, NAMED_TOOL, RAW
from tests.support.on_a_terminal import cove_on_a_terminal, raw_found, read_all

SERVER = Path(__file__).parents[2] / "support" / "hostile_tool_server.py"


def _shown(text: str) -> str:
    """`text` as the terminal-text rule shows it (written out here, not taken from Cove)."""
    return (
        text.replace("\x1b", "\\x1b")
        .replace("\x07", "\\x07")
        .replace("\x9b", "\\x9b")
        .replace("\u202e", "\\u202e")
        .replace("\u2066", "\\u2066")
        .replace("\u2069", "\\u2069")
    )


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    path = tmp_path / "calls.txt"
    path.write_text("")
    return path


def _add(home: Path, calls_file: Path, mode: str = "serve") -> None:
    done = cove(home, "tools", "add", "hostile", "--", sys.executable, str(SERVER), str(calls_file), mode)
    assert done.returncode == 0, done.stderr


def _terminal(home: Path, *args: str, answer: bytes | None = None) -> tuple[int, str]:
    code, seen = cove_on_a_terminal(home, *args, answer=None if answer is None else (lambda _seen: answer))
    assert not raw_found(seen, RAW), (raw_found(seen, RAW), seen)
    shown = seen.decode("utf-8", errors="replace").replace("\r\n", "\n")
    assert "Traceback" not in shown, shown
    return code, shown


def test_tools_list_shows_names_and_descriptions_escaped_on_a_terminal_and_exact_in_a_pipe(tmp_path: Path, calls_file: Path) -> None:
    _add(tmp_path, calls_file)
    code, shown = _terminal(tmp_path, "tools", "list")
    assert code == 0, shown
    assert f"  - {_shown(NAMED_TOOL)}: {_shown(DESCRIPTION)}\n" in shown
    assert f"  - fail: Fails. {_shown(HOSTILE)}\n" in shown

    piped = cove(tmp_path, "tools", "list")
    assert piped.returncode == 0, piped.stderr
    assert f"  - {NAMED_TOOL}: {DESCRIPTION}\n" in piped.stdout  # a pipe gets the exact text
    assert calls_file.read_text() == ""  # listing calls no tool


def test_tools_call_shows_the_result_and_the_error_sentences_escaped(tmp_path: Path, calls_file: Path) -> None:
    _add(tmp_path, calls_file)
    arguments = json.dumps({"text": "arg"})
    code, shown = _terminal(tmp_path, "tools", "call", "hostile", NAMED_TOOL, arguments, "--allow-tools")
    assert code == 0, shown
    assert f"found arg: {_shown(HOSTILE)}\nsecond line {_shown(HOSTILE)}\n" in shown

    code, shown = _terminal(tmp_path, "tools", "call", "hostile", "fail", "--allow-tools")
    assert code == 1 and f"the lookup failed: {_shown(HOSTILE)}" in shown, shown
    code, shown = _terminal(tmp_path, "tools", "call", "hostile", "refuse", "--allow-tools")
    assert code == 1 and f"refused: {_shown(HOSTILE)}" in shown, shown
    code, shown = _terminal(tmp_path, "tools", "call", "hostile", "nope", "--allow-tools")
    assert code == 1 and f"has no tool 'nope' (it offers: {_shown(NAMED_TOOL)}, fail, refuse)" in shown, shown

    piped = cove(tmp_path, "tools", "call", "hostile", NAMED_TOOL, arguments, "--allow-tools")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == f"found arg: {HOSTILE}\nsecond line {HOSTILE}\n"
    failed = cove(tmp_path, "tools", "call", "hostile", "fail", "--allow-tools")
    assert failed.stdout == f"Error executing tool fail: the lookup failed: {HOSTILE}\n"
    assert "reported an error" in assert_clean_error(failed)
    assert f"refused: {HOSTILE}" in assert_clean_error(cove(tmp_path, "tools", "call", "hostile", "refuse", "--allow-tools"))
    assert f"(it offers: {NAMED_TOOL}, fail, refuse)" in assert_clean_error(cove(tmp_path, "tools", "call", "hostile", "nope"))


def test_the_approval_question_and_the_denial_cannot_read_backwards(tmp_path: Path, calls_file: Path) -> None:
    _add(tmp_path, calls_file)
    arguments = {"path": "/home/me/\u202etxt.exe", "why": "\u2066ok\u2069 \x9b2J \x1b]0;x\x07"}
    code, shown = _terminal(tmp_path, "tools", "call", "hostile", NAMED_TOOL, json.dumps(arguments), answer=b"d")
    assert code == 1, shown
    asked = shown.split("Allow once [o]", 1)[0]
    assert f"wants to run the tool '{_shown(NAMED_TOOL)}' with these arguments:\n" in asked
    # The arguments still read as JSON: JSON's own escapes, which decode to the exact arguments.
    json_shown = asked.split("with these arguments:\n", 1)[1]
    assert '"path": "/home/me/\\u202etxt.exe"' in json_shown
    assert '"why": "\\u2066ok\\u2069 \\u009b2J \\u001b]0;x\\u0007"' in json_shown
    assert json.loads(json_shown) == arguments
    assert f"The person denied this call of the tool '{_shown(NAMED_TOOL)}'" in shown
    assert calls_file.read_text() == ""  # the denied call never reached the server

    code, shown = _terminal(tmp_path, "tools", "call", "hostile", NAMED_TOOL, json.dumps({"text": "once"}), answer=b"o")
    assert code == 0 and f"found once: {_shown(HOSTILE)}" in shown, shown
    assert len(calls_file.read_text().split()) == 1


@pytest.mark.parametrize("mode", ["refuse-list", "die"])
def test_a_server_that_fails_is_one_escaped_sentence(tmp_path: Path, calls_file: Path, mode: str) -> None:
    _add(tmp_path, calls_file, mode)
    code, shown = _terminal(tmp_path, "tools", "list")
    assert code == 0 and "the tool server 'hostile'" in shown, shown
    code, shown = _terminal(tmp_path, "tools", "call", "hostile", "fail", "--allow-tools")
    assert code == 1 and "cove: the tool server 'hostile'" in shown, shown
    if mode == "refuse-list":
        assert f"no tools for you: {_shown(HOSTILE)}" in shown
        assert f"no tools for you: {HOSTILE}" in assert_clean_error(cove(tmp_path, "tools", "call", "hostile", "fail"))


def test_chat_tool_lines_show_the_call_and_result_escaped_on_a_terminal(
    tmp_path: Path, calls_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines `cove chat --tools` prints for a call (app/cli/turn_lines.py), fed with what the real
    server answered, written to a real pty."""
    from app.cli.turn_lines import say_tool
    from app.mcp.approval import ToolRequest, allow_without_asking, decide
    from app.mcp.host import McpHost
    from app.mcp.servers import stdio_server
    from app.turn.events import ToolCallEvent, ToolResultEvent
    from tests.app.mcp.conftest import MemoryRules

    server = stdio_server("hostile", [sys.executable, str(SERVER), str(calls_file)])
    with McpHost(tmp_path / "tool-servers.log") as host:
        [tool] = [t for t in host.list_tools(server) if t.name == NAMED_TOOL]
        request = ToolRequest(server, tool.name, {"text": HOSTILE})
        result = host.call_tool(request, decide(request, allow_without_asking, MemoryRules()))
    master, replica = os.openpty()
    with os.fdopen(replica, "w", encoding="utf-8", closefd=True) as terminal:
        assert terminal.isatty()
        monkeypatch.setattr(sys, "stderr", terminal)
        say_tool(ToolCallEvent("c1", tool.name, json.dumps(request.arguments, ensure_ascii=False), "hostile"))
        say_tool(ToolResultEvent("c1", result.text, server="hostile", status=result.status))
        terminal.flush()
        seen = read_all(master)
    os.close(master)
    assert not raw_found(seen, RAW), seen
    shown = seen.decode("utf-8").replace("\r\n", "\n")
    assert f"[tool call: hostile/{_shown(NAMED_TOOL)} " in shown
    assert f"  found {_shown(HOSTILE)}: {_shown(HOSTILE)}\n" in shown
