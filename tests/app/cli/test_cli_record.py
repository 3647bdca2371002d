"""`cove record` run as a person runs it (issue 46): a reply forged with Cove's own functions and
hidden by deleting the key file is not "intact" after the next ordinary `cove chat`; a key lost
honestly verifies again only with the verification keys of both keys; and `export --since/--until`
take ISO 8601 dates and date-times and refuse anything else with a sentence and exit 2."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from app.core import open_core
from app.paths import resolve_paths
from app.store.request_log import RequestLog
from models.timestamps import parse_utc_timestamp
from tests.support.cli import assert_clean_error, cove
from tests.support.record_tampering import fill_record, reply_changed_and_rehashed

# What verify's last sentence says each check proves (app/store/record_verdict.py).
PROVEN_HERE = (
    "This machine's key finds an edit made without it, but whoever can write this account's files can "
    "rewrite that key too: only the verification key kept elsewhere proves the record against them"
)
PROVEN_WITH_KEY = "The verification key proves each entry its seals cover is as Cove wrote it"


def _chat(home: Path, model: Path, text: str) -> str:
    done = cove(home, "chat", "--model", str(model), "--new", "--max-tokens", "4", "--seed", "1", text)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _export_key(home: Path, to: Path) -> Path:
    done = cove(home, "record", "key", "--export")
    assert done.returncode == 0, done.stderr
    to.write_text(done.stdout, encoding="utf-8")
    return to


def _key_files(home: Path) -> list[Path]:
    return sorted((home / "data").glob("record-key-*.json"))


def test_a_forged_reply_hidden_by_deleting_the_key_file_does_not_verify(tmp_path: Path, tiny_gguf: Path) -> None:
    home = tmp_path / "home"
    for i in range(3):
        _chat(home, tiny_gguf, f"question {i}")
    kept = _export_key(home, tmp_path / "kept-key.txt")
    honest = cove(home, "record", "verify")
    assert honest.returncode == 0 and "3 entries: intact" in honest.stdout and PROVEN_HERE in honest.stdout

    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        reply_changed_and_rehashed(core)  # entry 3's reply rewritten, every hash recomputed with Cove's functions
    finally:
        core.close()
    (key_file,) = _key_files(home)
    key_file.unlink()
    said = _chat(home, tiny_gguf, "one more")  # one ordinary chat
    assert "no sealing key of this record was found" in said

    plain = cove(home, "record", "verify")
    assert plain.returncode == 1, plain.stdout
    assert "5 entries: NOT INTACT" in plain.stdout and "Traceback" not in plain.stderr
    assert "Entries sealed with a key this check could not use: 1, 2, 3." in plain.stdout
    assert "is not on this machine: it vanished" in plain.stdout
    assert "were made with another key" not in plain.stdout  # no longer a note
    with_key = cove(home, "record", "verify", "--key", str(kept))
    assert with_key.returncode == 1 and "NOT INTACT" in with_key.stdout
    assert "Seals of key" in with_key.stdout and "that do not match (forged, or over entries that changed): epochs 2." in with_key.stdout


def test_a_key_lost_honestly_verifies_with_the_verification_keys_of_both(tmp_path: Path, tiny_gguf: Path) -> None:
    home = tmp_path / "home"
    _chat(home, tiny_gguf, "before")
    first = _export_key(home, tmp_path / "first.txt")
    _chat(home, tiny_gguf, "before again")
    _key_files(home)[0].unlink()  # a wiped keyring, a new machine
    _chat(home, tiny_gguf, "after")
    second = _export_key(home, tmp_path / "second.txt")

    plain = cove(home, "record", "verify")
    assert plain.returncode == 1 and "Entries sealed with a key this check could not use: 1, 2." in plain.stdout
    old_only = cove(home, "record", "verify", "--key", str(first))
    assert old_only.returncode == 1 and "is not among the verification keys given" in old_only.stdout
    both = cove(home, "record", "verify", "--key", str(first), "--key", str(second))
    assert both.returncode == 0, both.stdout
    assert "4 entries: intact" in both.stdout and "It was sealed with 2 keys, one after the other" in both.stdout
    assert PROVEN_WITH_KEY in both.stdout
    as_json = json.loads(cove(home, "record", "verify", "--json").stdout)
    assert as_json["intact"] is False and as_json["unchecked"] == [1, 2] and as_json["keys"][1]["began_at"] == 3


@pytest.fixture
def record_home(tmp_path: Path) -> tuple[Path, datetime]:
    """A home whose record holds three entries, and when the first was written."""
    home = tmp_path / "home"
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        log = RequestLog(core.db)
        fill_record(log, 3)
        return home, parse_utc_timestamp(log.entries()[0]["at"])
    finally:
        core.close()


def _exported(home: Path, *args: str) -> int:
    done = cove(home, "record", "export", *args)
    assert done.returncode == 0, done.stderr
    return len(done.stdout.splitlines())


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("text", ["garbage", "2026-13-01", "10:00", ""])
def test_a_moment_that_is_not_a_date_is_refused_with_a_sentence(record_home: tuple[Path, datetime], option: str, text: str) -> None:
    done = cove(record_home[0], "record", "export", option, text)
    line = assert_clean_error(done, 2)
    assert f"argument {option}: {text!r} is not a date or a date-time: give an ISO 8601 date" in line
    assert done.stdout == ""


def test_dates_and_date_times_with_or_without_a_zone_choose_the_entries(record_home: tuple[Path, datetime]) -> None:
    home, now = record_home  # the entries were written within a second of `now`
    today, yesterday, tomorrow = now.date(), (now - timedelta(days=1)).date(), (now + timedelta(days=1)).date()
    assert _exported(home) == 3
    assert _exported(home, "--since", today.isoformat()) == 3
    assert _exported(home, "--until", today.isoformat()) == 3  # a date: to the end of that day
    assert _exported(home, "--until", yesterday.isoformat()) == 0
    assert _exported(home, "--since", tomorrow.isoformat()) == 0
    hour_ago = now - timedelta(hours=1)
    assert _exported(home, "--since", hour_ago.strftime("%Y-%m-%dT%H:%M")) == 3  # no zone: UTC
    east = timezone(timedelta(hours=5))
    assert _exported(home, "--since", hour_ago.astimezone(east).isoformat()) == 3
    assert _exported(home, "--since", (now + timedelta(minutes=5)).astimezone(east).isoformat()) == 0
    assert _exported(home, "--until", (now - timedelta(minutes=5)).astimezone(east).isoformat()) == 0
    assert (
        _exported(
            home,
            "--since",
            hour_ago.strftime("%Y-%m-%d %H:%M:%SZ"),
            "--until",
            (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        )
        == 3
    )
    backwards = cove(home, "record", "export", "--since", tomorrow.isoformat(), "--until", today.isoformat())
    assert "is after --until" in assert_clean_error(backwards, 2)


def test_the_help_says_which_moments_are_accepted(tmp_path: Path) -> None:
    done = cove(tmp_path, "record", "export", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "ISO 8601 date (2026-12-01) or date-time" in text and "a time without a zone is UTC" in text
