"""A document whose name, heading and text carry terminal escapes and bidi controls cannot steer the
terminal: `cove docs search` and `status` (plain and `--json`) and `list` on a real pty show them as
escapes (JSON's own in JSON, so it still decodes to the exact text), and a pipe gets the exact text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cove
from tests.support.hostile_tool_server import RAW
from tests.support.on_a_terminal import cove_on_a_terminal, raw_found

FOLDER = "docs \u2066\x1b[2J\u2069"
NAME = "notes \u202etxt.exe\u2066 \x1b]0;pwned\x07 \x9b2J.md"
HEADING = "Tides \u202ereversed\u2069 \x1b[2J"
TEXT = "The harbour keeper counted the seabirds at dawn \u202eevery\u2069 morning \x9b31m \x1b]0;pwned\x07 done."


def _collection(tmp_path: Path) -> tuple[Path, Path]:
    home, folder = tmp_path / "home", tmp_path / FOLDER
    folder.mkdir()
    (folder / NAME).write_text(f"# {HEADING}\n\n{TEXT}\n", encoding="utf-8")
    added = cove(home, "docs", "add", "notes", str(folder), "--no-embed")
    assert added.returncode == 0, added.stderr
    return home, folder / NAME


def _on_a_terminal(home: Path, *args: str) -> str:
    code, seen = cove_on_a_terminal(home, *args)
    assert code == 0, seen
    assert not raw_found(seen, RAW), (raw_found(seen, RAW), seen)
    return seen.decode("utf-8").replace("\r\n", "\n")


def test_docs_search_json_on_a_terminal_escapes_paths_and_still_decodes_exactly(tmp_path: Path) -> None:
    home, path = _collection(tmp_path)
    shown = _on_a_terminal(home, "docs", "search", "notes", "harbour keeper seabirds", "--json")
    found = json.loads(shown)  # the terminal's JSON decodes to the exact text
    assert found[0]["path"] == str(path) and TEXT in found[0]["text"]
    assert "\\u202etxt.exe\\u2066 \\u001b]0;pwned\\u0007 \\u009b2J.md" in shown

    piped = json.loads(cove(home, "docs", "search", "notes", "harbour keeper seabirds", "--json").stdout)
    assert piped == found
    status = json.loads(_on_a_terminal(home, "docs", "status", "notes", "--json"))
    assert status["roots"] == [str(path.parent)]


def test_docs_plain_output_on_a_terminal_shows_escapes(tmp_path: Path) -> None:
    home, path = _collection(tmp_path)
    shown = _on_a_terminal(home, "docs", "search", "notes", "harbour keeper seabirds")
    assert "notes \\u202etxt.exe\\u2066 \\x1b]0;pwned\\x07 \\x9b2J.md" in shown
    assert "\\u202eevery\\u2069 morning \\x9b31m \\x1b]0;pwned\\x07 done." in shown
    folder = "docs \\u2066\\x1b[2J\\u2069"
    assert folder in _on_a_terminal(home, "docs", "list")
    assert folder in _on_a_terminal(home, "docs", "status", "notes")

    piped = cove(home, "docs", "search", "notes", "harbour keeper seabirds")
    assert str(path) in piped.stdout and TEXT in piped.stdout  # a pipe gets the exact text
