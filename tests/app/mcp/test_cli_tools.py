"""`cove tools` end to end, as a person runs it (a subprocess with its own COVE_HOME)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.app.mcp.conftest import FAULT_SERVER, calls
from tests.support.cli import assert_clean_error, cove


def test_add_prints_the_command_line_and_starts_nothing(tmp_path: Path) -> None:
    calls_file = tmp_path / "calls.txt"
    done = cove(tmp_path, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    assert done.returncode == 0, done.stderr
    assert f"  {sys.executable} {FAULT_SERVER} {calls_file}\nNothing was started." in done.stdout
    assert not calls_file.exists() and not (tmp_path / "logs" / "tool-servers.log").exists()


def test_list_call_always_and_remove(tmp_path: Path) -> None:
    calls_file = tmp_path / "calls.txt"
    cove(tmp_path, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    listed = cove(tmp_path, "tools", "list")
    assert "- echo: Echo the text back." in listed.stdout and "cannot see what this server does on the network" in listed.stdout
    denied = cove(tmp_path, "tools", "call", "fault", "echo", '{"text": "no"}', stdin="")
    assert denied.returncode == 1 and "denied" in denied.stderr and '"text": "no"' in denied.stderr
    once = cove(tmp_path, "tools", "call", "fault", "echo", '{"text": "yes"}', stdin="o\n")
    assert once.stdout == "yes\n"
    cove(tmp_path, "tools", "call", "fault", "echo", '{"text": "always"}', stdin="a\n")
    kept = cove(tmp_path, "tools", "call", "fault", "echo", '{"text": "unasked"}', stdin="")
    assert kept.stdout == "unasked\n" and "Allow once" not in kept.stderr
    scripted = cove(tmp_path, "tools", "call", "fault", "env", "--allow-tools")
    assert "HF_TOKEN" not in json.loads(scripted.stdout)
    assert calls(calls_file).count("echo") == 3  # the denied call never reached it
    verified = cove(tmp_path, "record", "verify")
    assert "5 entries: intact" in verified.stdout
    assert cove(tmp_path, "tools", "remove", "fault").returncode == 0
    assert "No tool servers yet" in cove(tmp_path, "tools", "list").stdout


def test_bad_input_is_one_sentence(tmp_path: Path) -> None:
    cove(tmp_path, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(tmp_path / "c"))
    assert "no tool server named 'nope'" in assert_clean_error(cove(tmp_path, "tools", "call", "nope", "echo"))
    assert "has no tool 'nope'" in assert_clean_error(cove(tmp_path, "tools", "call", "fault", "nope"))
    assert "not JSON" in assert_clean_error(cove(tmp_path, "tools", "call", "fault", "echo", "{bad"))
    assert "not this machine" in assert_clean_error(cove(tmp_path, "tools", "add", "w", "--url", "http://example.com/mcp"))
    assert "not an http" in assert_clean_error(cove(tmp_path, "tools", "add", "w", "--url", "ftp://127.0.0.1/x"))
    assert "needs a command" in assert_clean_error(cove(tmp_path, "tools", "add", "empty"))


def test_offline_starts_nothing_unless_allowed_once(tmp_path: Path, monkeypatch) -> None:
    calls_file = tmp_path / "calls.txt"
    cove(tmp_path, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    monkeypatch.setenv("COVE_OFFLINE", "1")
    listed = cove(tmp_path, "tools", "list")
    assert "not started: Cove is offline" in listed.stdout
    assert "starting:" not in (tmp_path / "logs" / "tool-servers.log").read_text()
    allowed = cove(tmp_path, "tools", "call", "fault", "echo", '{"text": "x"}', "--allow-tools", "--allow-offline-once")
    assert allowed.stdout == "x\n"


def test_the_limits_are_a_setting_that_calls_and_chats_take(tmp_path: Path) -> None:
    calls_file = tmp_path / "calls.txt"
    cove(tmp_path, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    shown = cove(tmp_path, "tools", "limits")
    assert shown.returncode == 0 and "may take 60 s" in shown.stdout and "20,000 characters" in shown.stdout

    changed = cove(tmp_path, "tools", "limits", "--max-result", "500")
    assert changed.returncode == 0 and "may take 60 s" in changed.stdout and "500 characters" in changed.stdout
    settings = json.loads((tmp_path / "data" / "settings.json").read_text())
    assert settings["tool_result_chars"] == 500 and settings["tool_timeout_s"] == 60

    # A call without --max-result is cut at the setting, and the model (here: stdout) is told.
    cut = cove(tmp_path, "tools", "call", "fault", "huge", '{"size": 2000}', "--allow-tools")
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.startswith("x" * 500) and "x" * 501 not in cut.stdout and "was 2000 characters" in cut.stdout

    assert_clean_error(cove(tmp_path, "tools", "limits", "--timeout", "0"))
    assert json.loads((tmp_path / "data" / "settings.json").read_text())["tool_timeout_s"] == 60  # unchanged
