""" "Always allow" follows the program and script that run, not a command line's text: a server added
as `python srv.py` keeps running the srv.py it was added with, from any folder; a changed script,
or a server kept with a relative path that now means another file, is asked about again with a
sentence saying what changed (app/mcp/identity.py, app/mcp/store.py). Real stdio MCP servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core import open_core
from app.mcp.approval import ALWAYS, DENY, ToolRequest, decide
from app.mcp.host import McpHost
from app.mcp.identity import file_digest, script_index
from app.mcp.results import ToolResult
from app.mcp.servers import ToolServer, ToolServerDefinitionError, stdio_server
from app.mcp.store import ToolServerStore
from app.paths import resolve_paths
from app.tools.parsers import Call
from app.turn.tools import ToolLoop, offered_tools
from tests.app.mcp.conftest import Approver
from tests.support.named_tool_server import calls_made, write_server
from tests.support.paths import REPO_ROOT

BIN = Path(sys.executable).parent  # holds `python`, with the mcp package


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """Two folders, each with its own srv.py (labelled A and B), the calls file, and `python` on PATH."""
    calls = tmp_path / "calls.txt"
    write_server(tmp_path / "a" / "srv.py", "A", calls, ["now"])
    write_server(tmp_path / "b" / "srv.py", "B", calls, ["now"])
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path / "a", tmp_path / "b", calls


@pytest.fixture
def store(tmp_path: Path):
    core = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    yield ToolServerStore(core.db)
    core.close()


def _call(host: McpHost, store: ToolServerStore, server: ToolServer, approver: Approver) -> ToolResult:
    request = ToolRequest(server, "now", {})
    return host.call_tool(request, decide(request, approver, store))


def test_a_relative_script_is_resolved_when_added_and_another_folders_srv_py_never_runs(
    folders, store: ToolServerStore, host: McpHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, calls = folders
    monkeypatch.chdir(a)
    server = store.add(stdio_server("mine", ["python", "srv.py"]))
    assert server.command == (str(BIN / "python"), str(a / "srv.py")) == store.get("mine").command
    approver = Approver(ALWAYS)
    assert _call(host, store, server, approver).text == "A ran now"

    monkeypatch.chdir(b)  # a later run of Cove from a folder with another srv.py
    host.stop_all()
    approver.answer = DENY
    assert _call(host, store, store.get("mine"), approver).text == "A ran now"
    assert len(approver.asked) == 1  # the same files run: "always" still holds
    assert calls_made(calls) == ["A now", "A now"]  # B's srv.py never ran


def test_a_changed_script_is_asked_again_saying_what_changed(
    folders, store: ToolServerStore, host: McpHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _b, calls = folders
    monkeypatch.chdir(a)
    server = store.add(stdio_server("mine", ["python", "srv.py"]))
    approver = Approver(ALWAYS)
    assert _call(host, store, server, approver).text == "A ran now"
    assert store.rules(server) == ["now"]

    write_server(a / "srv.py", "A2", calls, ["now"])  # its content changed since "always"
    host.stop_all()
    assert store.rules(server) == []
    loop = ToolLoop(host, offered_tools([(server, host.list_tools(server))]), approver, store, deferred=True)
    question = loop.prepare(Call("c1", "now", "{}"))
    assert isinstance(question, ToolRequest) and loop.ruled(question) is None  # the window asks too
    approver.answer = DENY
    denied = _call(host, store, server, approver)
    assert denied.status == "denied" and len(approver.asked) == 2
    why = approver.asked[1].asked_again
    assert why == question.asked_again
    assert why.startswith(f'You chose "always" for this tool before, but {a / "srv.py"} has changed since (its SHA-256 was ')
    assert calls_made(calls) == ["A now"]

    approver.answer = ALWAYS  # "always" again: kept for the new content
    assert _call(host, store, server, approver).text == "A2 ran now"
    assert _call(host, store, server, approver).text == "A2 ran now" and len(approver.asked) == 3


def test_a_server_kept_with_a_relative_path_asks_once_again_then_whenever_it_means_another_file(
    folders, store: ToolServerStore, host: McpHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, calls = folders
    # As Cove kept them before it resolved paths: the command as typed, the rule bound to its text.
    store.db["tool_servers"].insert(
        {"name": "old", "command": json.dumps(["python", "srv.py"]), "url": None, "added_at": "2025-01-01T00:00:00Z"}
    )
    store.db["tool_rules"].insert({"server": "old", "tool": "now", "identity": "python srv.py", "created_at": "2025-01-01T00:00:00Z"})
    server = store.get("old")
    assert server.command == ("python", "srv.py")  # not rewritten: Cove cannot know its folder

    monkeypatch.chdir(a)
    approver = Approver(ALWAYS)
    assert _call(host, store, server, approver).text == "A ran now"
    assert len(approver.asked) == 1 and 'that was before Cove tied "always"' in approver.asked[0].asked_again
    assert _call(host, store, server, approver).text == "A ran now" and len(approver.asked) == 1

    monkeypatch.chdir(b)
    host.stop_all()
    approver.answer = DENY
    assert _call(host, store, server, approver).status == "denied"
    assert approver.asked[1].asked_again == (
        f'You chose "always" for this tool before, but it would now run {b / "srv.py"} where it ran '
        f"{a / 'srv.py'} then ('srv.py' is read from the folder Cove runs in)."
    )
    assert calls_made(calls) == ["A now", "A now"]


def _cove(home: Path, cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=180
    )


def test_cove_tools_from_two_folders_as_a_person_runs_it(folders, tmp_path: Path) -> None:
    a, b, calls = folders
    home = tmp_path / "home"
    added = _cove(home, a, "tools", "add", "mine", "--", "python", "srv.py")
    assert added.returncode == 0, added.stderr
    assert f"  {BIN / 'python'} {a / 'srv.py'}\nNothing was started." in added.stdout
    assert _cove(home, a, "tools", "call", "mine", "now", stdin="a\n").stdout == "A ran now\n"

    elsewhere = _cove(home, b, "tools", "call", "mine", "now")  # no answer given: it must not need one
    assert elsewhere.stdout == "A ran now\n" and "Allow once" not in elsewhere.stderr

    write_server(a / "srv.py", "A2", calls, ["now"])
    changed = _cove(home, a, "tools", "call", "mine", "now")  # end of input denies
    assert changed.returncode == 1 and "Allow once" in changed.stderr and "denied" in changed.stderr
    assert calls_made(calls) == ["A now", "A now"]


def test_adding_from_a_folder_that_is_gone_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(
        ToolServerDefinitionError,
        match=r"^the program and script of 'python srv.py' cannot be found "
        r"from here \(.*\): give their full paths\.$",
    ):
        stdio_server("mine", ["python", "srv.py"])


def test_which_argument_is_the_script(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("x")
    assert script_index(["python", "-u", "srv.py", "data.csv"], str(tmp_path)) == 2
    assert script_index(["uv", "run", "--with", "mcp", "srv.py"], str(tmp_path)) == 4
    assert script_index(["java", "-jar", "srv.jar"], str(tmp_path)) == 2
    assert script_index(["python", "-m", "mcp_server_time", "srv.py"], str(tmp_path)) is None  # a module runs
    assert script_index(["bash", "-c", "python srv.py"], str(tmp_path)) is None
    assert script_index(["bash", "-e", "srv.sh"], str(tmp_path)) == 2  # a shell's -e is an option
    assert script_index(["mcp-server-sqlite", "data.csv"], str(tmp_path)) is None  # not an interpreter: data
    assert script_index(["/usr/bin/python3.11", "data.csv"], str(tmp_path)) == 1  # an existing file runs


def test_a_rewrite_that_puts_the_old_times_back_is_still_seen(tmp_path: Path) -> None:
    script = tmp_path / "srv.py"
    script.write_text("print('one')\n")
    before, stat = file_digest(str(script)), script.stat()
    script.write_text("print('two')\n")
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_digest(str(script)) != before
