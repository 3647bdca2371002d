"""Bad input to the command line gets a sentence, never a codec's message, and loses nothing:
bytes that are not UTF-8 in an argument or on standard input are sent and kept with U+FFFD
in their place (said once on stderr); a full disk is called a full disk, also when SQLite
only says "disk I/O error"."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from app.errors import describe_error
from app.store.database import DatabaseError
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}


def cove(home: Path, *args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=_env(home), input=stdin, capture_output=True, timeout=180
    )


@pytest.fixture
def home(tmp_path: Path, tiny_gguf: Path) -> Path:
    home = tmp_path / "home"
    done = cove(home, "models", "import", str(tiny_gguf))
    assert done.returncode == 0, done.stderr
    return home


def _messages(home: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        return con.execute("SELECT role, status, content FROM messages ORDER BY rowid").fetchall()
    finally:
        con.close()


def _system_prompt(home: Path) -> str:
    con = sqlite3.connect(home / "data" / "cove.db")
    try:
        return con.execute("SELECT system_prompt FROM conversations").fetchone()[0]
    finally:
        con.close()


def _clean(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode("utf-8")
    assert "codec" not in err and "Traceback" not in err, err
    return err


def test_a_non_utf8_argument_is_sent_with_replacement_and_said(home: Path) -> None:
    done = cove(home, "chat", "--max-tokens", "3", "--system", b"be \xff brief", b"hello \xff\xfe there")
    err = _clean(done)
    assert done.returncode == 0, err
    assert "your message is not valid utf-8 text in places" in err and "U+FFFD" in err
    assert "the system prompt is not valid utf-8 text in places" in err
    (user, reply) = _messages(home)
    assert user[:3] == ("user", "complete", "hello \ufffd\ufffd there")
    assert reply[0] == "assistant" and reply[1] in ("complete", "length") and reply[2]
    assert _system_prompt(home) == "be \ufffd brief"


def test_non_utf8_bytes_on_standard_input_are_sent_with_replacement_and_said(home: Path) -> None:
    done = cove(home, "chat", "--max-tokens", "3", stdin=b"caf\xe9 and \xc3\xa9t\xc3\xa9\n")
    err = _clean(done)
    assert done.returncode == 0, err
    assert err.count("U+FFFD") == 1 and "standard input" in err
    assert _messages(home)[0] == ("user", "complete", "caf\ufffd and été\n")


def test_a_valid_message_says_nothing_about_text(home: Path) -> None:
    done = cove(home, "chat", "--max-tokens", "2", "héllo ✓")
    err = _clean(done)
    assert done.returncode == 0 and "U+FFFD" not in err
    assert _messages(home)[0][2] == "héllo ✓"


def test_a_non_utf8_conversation_id_is_a_sentence(home: Path) -> None:
    done = cove(home, "chat", "--conversation", b"\xff", "hi")
    err = _clean(done)
    assert done.returncode == 1
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith("cove: ")


def test_an_unencodable_text_error_is_a_sentence_with_replacement() -> None:
    try:
        "id \udcff".encode("utf-8")
    except UnicodeEncodeError as exc:
        sentence = describe_error(exc)
    assert sentence == "“id \ufffd” is not valid text (utf-8 cannot hold part of it), so Cove could not use it"


class _Usage(NamedTuple):
    total: int
    used: int
    free: int


def _free_space(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: _Usage(1 << 30, (1 << 30) - free, free))


def test_a_disk_io_error_on_a_full_disk_is_said_to_be_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    try:
        raise sqlite3.OperationalError("disk I/O error")
    except sqlite3.OperationalError as cause:
        try:
            raise DatabaseError(f"Cannot read the history file {data / 'cove.db'}: {cause}.") from cause
        except DatabaseError as exc:
            wrapped = exc
        direct = cause
    _free_space(monkeypatch, 0)
    for exc in (wrapped, direct):
        sentence = describe_error(exc, data)
        assert sentence.startswith(f"the disk that holds {data} is full") and "free some space" in sentence
    _free_space(monkeypatch, 10 << 30)  # room enough: an I/O error is then what it says
    assert "disk I/O error" in describe_error(wrapped, data) and "is full" not in describe_error(wrapped, data)
    assert "disk I/O error" in describe_error(direct, data)


def test_sqlite_s_own_full_disk_error_is_said_to_be_a_full_disk(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "small.db")
    con.execute("CREATE TABLE t (x)")
    con.execute("PRAGMA max_page_count = 2")  # the same SQLITE_FULL a full disk gives
    with pytest.raises(sqlite3.OperationalError) as failed:
        con.execute("INSERT INTO t VALUES (?)", [b"x" * 100_000])
    con.close()
    assert describe_error(failed.value, tmp_path).startswith(f"the disk that holds {tmp_path} is full")


_FULL_DISK_SCRIPT = """
set -u
mount -t tmpfs -o size=2m tmpfs "$DISK" || exit 90
"$PY" -m app.cli.main history list > /dev/null || exit 91
head -c 4000000 /dev/zero > "$DISK/fill" 2>/dev/null
"$PY" -m app.cli.main history list; echo "rc=$?"
"$PY" -m app.cli.main record verify; echo "rc=$?"
"""


def test_history_list_and_record_verify_on_a_really_full_disk_say_so(tmp_path: Path) -> None:
    """A 2 MiB tmpfs (in a mount namespace of its own, so no root is needed where user
    namespaces are on), filled up after the history was made."""
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**_env(disk / "home"), "DISK": str(disk), "PY": sys.executable}
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", _FULL_DISK_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.stdout.split() == ["rc=1", "rc=1"], (done.stdout, done.stderr)
    assert len(lines) == 2 and all(line.startswith(f"cove: the disk that holds {disk / 'home' / 'data'} is full") for line in lines), (
        done.stderr
    )


def test_an_output_that_cannot_show_a_character_shows_a_question_mark(home: Path) -> None:
    sent = cove(home, "chat", "--new", "--max-tokens", "2", "héllo ✓")
    assert sent.returncode == 0, sent.stderr
    env = {**_env(home), "PYTHONIOENCODING": "ascii"}  # as a legacy locale's terminal
    for args in (["history", "list"], ["history", "search", "héllo"]):
        done = subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, input=b"", capture_output=True, timeout=180)
        err = _clean(done)
        assert done.returncode == 0, err
        assert b"h?llo ?" in done.stdout, done.stdout
    assert _messages(home)[0] == ("user", "complete", "héllo ✓")


def test_valid_text_an_encoding_cannot_hold_is_not_called_invalid() -> None:
    try:
        "héllo".encode("ascii")
    except UnicodeEncodeError as exc:
        sentence = describe_error(exc)
    assert "not valid" not in sentence and "UTF-8 locale" in sentence
