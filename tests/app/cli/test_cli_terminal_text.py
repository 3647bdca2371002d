"""Stored text reaches a terminal with its control characters shown, not obeyed: `cove history`
and `cove models` escape ESC, BEL, C1 and bidi overrides on a tty, while files, pipes and
JSON keep the exact text."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.terminal_text import escape_controls
from tests.support.tiny_model import write_tiny_gguf

HOSTILE = "before \x1b]0;pwned\x07\x1b[2J after"
MORE = "tab\tkept\nline kept \r\b\x7f \x9b31m \u202egnp.exe\u2069 end"
CONTROLS = {chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))} | {
    chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


class FakeTty(io.StringIO):
    """A standard output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def conversation_id(home: Path) -> str:
    from app.core import open_core

    core = open_core()
    try:
        c = core.history.create_conversation(system_prompt="sys " + HOSTILE)
        user = core.history.add_user_message(c.id, "hello " + HOSTILE + " " + MORE)
        reply = core.history.start_assistant_message(
            c.id, parent_id=user.id, model_name="evil\x1b[31m", model_sha256=None, model_quant=None, params={}
        )
        core.history.finish_assistant(reply.id, "reply " + HOSTILE, status="complete", metrics={})
        return c.id
    finally:
        core.close()


def _run_on_tty(monkeypatch: pytest.MonkeyPatch, *argv: str) -> str:
    tty = FakeTty()
    with monkeypatch.context() as m:
        m.setattr(sys, "stdout", tty)
        assert main(list(argv)) == 0
    return tty.getvalue()


def _no_controls(text: str) -> None:
    found = sorted({ch for ch in text if ch in CONTROLS})
    assert not found, [hex(ord(ch)) for ch in found]


def test_escape_controls_shows_each_control_and_keeps_newlines_and_tabs() -> None:
    assert escape_controls(HOSTILE) == "before \\x1b]0;pwned\\x07\\x1b[2J after"
    shown = escape_controls(MORE)
    assert shown == "tab\tkept\nline kept \\r\\x08\\x7f \\x9b31m \\u202egnp.exe\\u2069 end"
    _no_controls(escape_controls("".join(sorted(CONTROLS))))
    assert escape_controls("plain text, ünïcode 🙂") == "plain text, ünïcode 🙂"


@pytest.mark.parametrize("argv", [("show", "{id}"), ("list",), ("search", "pwned"), ("export", "{id}")])
def test_history_on_a_terminal_has_no_control_characters(home, conversation_id, monkeypatch, argv) -> None:
    out = _run_on_tty(monkeypatch, "history", *(a.format(id=conversation_id) for a in argv))
    assert "\x1b" not in out and "\x07" not in out
    _no_controls(out)
    if argv[0] in ("show", "export"):
        assert "reply before \\x1b]0;pwned\\x07\\x1b[2J after" in out
        assert "tab\tkept\nline kept" in out  # newlines and tabs are text, not controls


def test_history_json_on_a_terminal_is_exact_once_decoded(home, conversation_id, monkeypatch) -> None:
    out = _run_on_tty(monkeypatch, "history", "show", conversation_id, "--json")
    _no_controls(out)  # JSON escapes them (\u001b ...), C1 and bidi included
    shown = json.loads(out)
    assert shown["messages"][0]["content"] == "hello " + HOSTILE + " " + MORE
    assert shown["messages"][1]["content"] == "reply " + HOSTILE
    exported = json.loads(_run_on_tty(monkeypatch, "history", "export", conversation_id, "--format", "json"))
    assert exported["messages"][0]["content"] == "hello " + HOSTILE + " " + MORE


def test_files_and_pipes_keep_the_exact_text(home, conversation_id, tmp_path, capsys) -> None:
    out_file = tmp_path / "chat.md"
    assert main(["history", "export", conversation_id, "-o", str(out_file)]) == 0
    text = out_file.read_bytes().decode("utf-8")  # read_text would turn \r into \n
    assert "reply " + HOSTILE in text and MORE in text
    capsys.readouterr()
    assert main(["history", "export", conversation_id]) == 0  # stdout is a pipe here, not a terminal
    assert "reply " + HOSTILE in capsys.readouterr().out
    assert main(["history", "show", conversation_id]) == 0
    assert "reply " + HOSTILE in capsys.readouterr().out


def test_model_header_strings_are_escaped_on_a_terminal(home, tmp_path, monkeypatch) -> None:
    path = write_tiny_gguf(tmp_path / "hostile.gguf", name="name\x1b]0;pwned\x07\x1b[2J")
    assert main(["models", "import", str(path)]) == 0
    listed = _run_on_tty(monkeypatch, "models", "list")
    info = _run_on_tty(monkeypatch, "models", "info", "hostile")
    for out in (listed, info):
        _no_controls(out)
    assert "name\\x1b]0;pwned\\x07\\x1b[2J" in info
    as_json = json.loads(_run_on_tty(monkeypatch, "models", "info", "hostile", "--json"))
    assert as_json["general_name"] == "name\x1b]0;pwned\x07\x1b[2J"


def test_a_streamed_reply_reaches_a_terminal_escaped_and_a_pipe_exact(monkeypatch) -> None:
    from app.cli import chat_cmd

    hostile = "line one\n\x1b]0;pwned\x07\x1b[2J tab\there"
    tty = FakeTty()
    monkeypatch.setattr(sys, "stdout", tty)
    for piece in (hostile[:10], hostile[10:]):  # an escape sequence split across two pieces
        chat_cmd.stream_to_stdout(piece)
    shown = tty.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.startswith("line one\n") and "\t" in shown
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stdout", pipe)
    chat_cmd.stream_to_stdout(hostile)
    assert pipe.getvalue() == hostile
