"""Opening the history file: durable pragmas, atomic named migrations, read-only opening
of a newer file, and damaged files moved aside (never deleted)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlite_utils

from app.store.database import DatabaseError, close_database, open_database
from app.store.history import History
from app.store.migrations import MIGRATIONS
from models.timestamps import utc_timestamp


def _pragmas(db: sqlite_utils.Database) -> tuple[str, int, int, int]:
    conn = db.conn
    return (
        conn.execute("PRAGMA journal_mode").fetchone()[0],
        conn.execute("PRAGMA synchronous").fetchone()[0],
        conn.execute("PRAGMA foreign_keys").fetchone()[0],
        conn.execute("PRAGMA busy_timeout").fetchone()[0],
    )


@contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain read-only connection from outside Cove's code, closed afterwards."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def test_fresh_database_has_durable_pragmas_and_full_schema(tmp_path: Path) -> None:
    opened = open_database(tmp_path / "data" / "cove.db")
    try:
        assert opened.read_only is False
        assert opened.notice is None
        assert _pragmas(opened.db) == ("wal", 2, 1, 5000)
        tables = set(opened.db.table_names())
        assert {"conversations", "messages", "messages_fts", "models", "_migrations"} <= tables
        indexes = {tuple(i.columns) for i in opened.db["messages"].indexes}
        assert ("conversation_id", "seq") in indexes
        assert opened.db["messages"].detect_fts() == "messages_fts"
    finally:
        close_database(opened.db)


def test_every_reopen_gets_the_pragmas_too(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    for _ in range(2):
        opened = open_database(path)
        assert _pragmas(opened.db) == ("wal", 2, 1, 5000)
        close_database(opened.db)


def test_migrations_are_recorded_once_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    close_database(open_database(path).db)
    with _raw(path) as conn:
        first = conn.execute("SELECT name, applied_at FROM _migrations ORDER BY rowid").fetchall()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert [name for name, _ in first] == [name for name, _ in MIGRATIONS]

    opened = open_database(path)
    again = opened.db.conn.execute("SELECT name, applied_at FROM _migrations ORDER BY rowid").fetchall()
    assert again == first
    assert opened.db.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert opened.notice is None
    close_database(opened.db)
    # No update happened, so no pre-migration backup was needed.
    assert not list(tmp_path.glob("cove.db.pre-v*"))


def test_appended_migration_runs_once_and_backs_up_first(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    close_database(open_database(path).db)
    calls: list[int] = []

    def add_notes(db: sqlite_utils.Database) -> None:
        calls.append(1)
        db["notes"].create({"id": int, "text": str}, pk="id")

    extra = [("9001_notes", add_notes)]
    for _ in range(2):
        opened = open_database(path, extra_migrations=extra)
        assert opened.db["notes"].exists()
        assert opened.db.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1
        close_database(opened.db)
    assert calls == [1]
    backup = tmp_path / f"cove.db.pre-v{len(MIGRATIONS)}"
    with _raw(backup) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_failing_migration_leaves_the_old_schema(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    opened = open_database(path)
    History(opened.db).create_conversation(title="kept")
    close_database(opened.db)

    def half_done_then_boom(db: sqlite_utils.Database) -> None:
        db["half"].create({"id": int}, pk="id")
        db.execute("ALTER TABLE conversations ADD COLUMN colour TEXT")
        db.execute("UPDATE conversations SET title = 'changed'")
        raise RuntimeError("boom")

    with pytest.raises(DatabaseError, match="boom"):
        open_database(path, extra_migrations=[("9001_boom", half_done_then_boom)])

    with _raw(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
        assert "9001_boom" not in names
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "half" not in tables
        columns = {r[1] for r in conn.execute("PRAGMA table_info(conversations)")}
        assert "colour" not in columns
        assert conn.execute("SELECT title FROM conversations").fetchall() == [("kept",)]

    # The earlier good migration of a batch stays applied; the failing one does not.
    def good(db: sqlite_utils.Database) -> None:
        db["good"].create({"id": int}, pk="id")

    with pytest.raises(DatabaseError):
        open_database(path, extra_migrations=[("9001_good", good), ("9002_boom", half_done_then_boom)])
    with _raw(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
        assert names[-1] == "9001_good"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 1

    # And the same file still opens normally once the bad migration is fixed.
    opened = open_database(path, extra_migrations=[("9001_good", good)])
    assert opened.read_only is False
    close_database(opened.db)


def test_newer_schema_opens_read_only_and_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    opened = open_database(path)
    History(opened.db).create_conversation(title="from the future")
    close_database(opened.db)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()

    opened = open_database(path)
    assert opened.read_only is True
    assert opened.notice is not None
    assert "newer Cove" in opened.notice and "999" in opened.notice and "read-only" in opened.notice
    history = History(opened.db)
    assert [c.title for c in history.list_conversations()] == ["from the future"]
    assert history.repair_interrupted() == 0
    with pytest.raises(sqlite3.OperationalError):
        opened.db.execute(
            "INSERT INTO conversations (id, created_at, updated_at) VALUES ('x', ?, ?)",
            [utc_timestamp(), utc_timestamp()],
        )
    with pytest.raises(sqlite3.OperationalError):
        history.create_conversation(title="nope")
    assert opened.db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert opened.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    close_database(opened.db)

    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    with _raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 999
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] == 1
    assert not list(tmp_path.glob("cove.db.pre-v*"))


def _corrupt_copies(tmp_path: Path) -> list[Path]:
    return sorted(p for p in tmp_path.glob("cove.db.corrupt-*") if not p.name.endswith(("-wal", "-shm")))


def _assert_fresh_and_usable(opened_db: sqlite_utils.Database) -> None:
    history = History(opened_db)
    assert history.list_conversations() == []
    conversation = history.create_conversation()
    history.add_user_message(conversation.id, "a new start")
    assert opened_db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_garbage_file_is_moved_aside_with_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    garbage = bytes(range(256)) * 40
    wal_garbage = b"not a wal" * 100
    path.write_bytes(garbage)
    (tmp_path / "cove.db-wal").write_bytes(wal_garbage)

    opened = open_database(path)
    moved = _corrupt_copies(tmp_path)
    assert len(moved) == 1
    assert moved[0].read_bytes() == garbage
    assert Path(str(moved[0]) + "-wal").read_bytes() == wal_garbage
    assert opened.read_only is False
    assert opened.notice is not None
    assert "damaged" in opened.notice and str(moved[0]) in opened.notice
    _assert_fresh_and_usable(opened.db)
    close_database(opened.db)


def test_flipped_page_bytes_are_detected_and_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    opened = open_database(path)
    history = History(opened.db)
    for n in range(40):
        conversation = history.create_conversation(title=f"chat {n}")
        history.add_user_message(conversation.id, "lorem ipsum dolor sit amet " * 20)
    close_database(opened.db)
    assert not (tmp_path / "cove.db-wal").exists() or (tmp_path / "cove.db-wal").stat().st_size == 0

    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    assert len(data) >= 4 * page_size
    for offset in range(2 * page_size, 2 * page_size + 64):  # the header of page 3
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))

    opened = open_database(path)
    moved = _corrupt_copies(tmp_path)
    assert len(moved) == 1
    assert moved[0].read_bytes() == bytes(data)
    assert opened.notice is not None and "damaged" in opened.notice
    _assert_fresh_and_usable(opened.db)
    close_database(opened.db)

    # A second damaged file never overwrites the first copy.
    path.write_bytes(b"\x00garbage" * 600)
    opened = open_database(path)
    assert len(_corrupt_copies(tmp_path)) == 2
    close_database(opened.db)


def test_unopenable_path_raises_a_readable_error(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    path.mkdir()
    with pytest.raises(DatabaseError, match="history file"):
        open_database(path)
    assert path.is_dir()  # never moved or deleted: a directory is not a damaged database
