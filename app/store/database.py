"""Opening and closing the history file: durable connection settings, schema migration,
read-only opening of files from a newer Cove, and moving a damaged file aside."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from app.set_aside import move_database_aside
from app.store.migrations import MIGRATIONS, MIGRATIONS_TABLE, Migration, MigrationError, apply_migrations

BUSY_TIMEOUT_MS = 5000

# SQLite primary result codes that mean "this file is damaged", as opposed to "busy",
# "locked" or "cannot open", which are not the file's fault and must never move it.
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


class DatabaseError(Exception):
    """The history file could not be opened or updated; the message is one readable sentence."""


@dataclass(frozen=True)
class OpenedDatabase:
    db: sqlite_utils.Database
    # True when the file is from a newer Cove (user_version > known): opened with
    # mode=ro and query_only, and never written.
    read_only: bool
    # A sentence for the person, or None when there is nothing to say.
    notice: str | None


def open_database(path: Path, *, extra_migrations: Sequence[Migration] = ()) -> OpenedDatabase:
    """Open (creating if needed) the history file at `path` and bring its schema up to date.

    A damaged file is moved aside (never deleted) and a fresh one started; a file
    written by a newer Cove is opened read-only. Either way `notice` says so.
    Raises DatabaseError when the file cannot be opened or migrated at all.
    """
    path = Path(path)
    migrations: tuple[Migration, ...] = (*MIGRATIONS, *extra_migrations)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseError(f"Cannot create the folder for the history file {path}: {exc}.") from exc

    notice: str | None = None
    if path.exists() and path.stat().st_size > 0:
        damaged, version, names = _inspect(path)
        if damaged:
            moved = _move_aside(path)
            notice = f"The history file was damaged; it was moved to {moved} and a new one started."
        elif version > len(migrations) or not set(names) <= {name for name, _ in migrations}:
            db = _connect(path, read_only=True)
            return OpenedDatabase(
                db=db,
                read_only=True,
                notice=(f"This history was written by a newer Cove (schema {version}); opened read-only."),
            )
        elif 0 < version < len(migrations):
            _backup_before_migrating(path, version)

    db = _connect(path, read_only=False)
    try:
        apply_migrations(db, migrations)
    except MigrationError as exc:
        db.close()
        raise DatabaseError(f"Could not update the history file {path}: {exc}.") from exc
    except BaseException:
        db.close()
        raise
    return OpenedDatabase(db=db, read_only=False, notice=notice)


def close_database(db: sqlite_utils.Database) -> None:
    """Tidy up and close: PRAGMA optimize and a truncating WAL checkpoint, then close.

    Safe on a read-only connection (it then only closes).
    """
    try:
        if db.conn.in_transaction:
            db.rollback()
        query_only = db.conn.execute("PRAGMA query_only").fetchone()[0]
        if not query_only:
            db.conn.execute("PRAGMA optimize")
            db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # tidying is best effort; every commit is already durable
    finally:
        db.close()


def open_writer(path: Path) -> sqlite_utils.Database:
    """Another connection that writes, for a thread of its own (the API server's store thread):
    the file is already open, checked and migrated by open_database. Writers take turns through
    SQLite's lock, waiting up to the busy timeout."""
    return _connect(path, read_only=False)


def open_reader(path: Path) -> sqlite_utils.Database:
    """A read-only connection for another thread (WAL lets it read while the writer writes).
    Invariant: the UI thread's connection stays the only writer."""
    return _connect(path, read_only=True)


def _connect(path: Path, *, read_only: bool) -> sqlite_utils.Database:
    """One connection with Cove's settings. Every connection to the file goes through here."""
    try:
        if read_only:
            uri = path.resolve().as_uri() + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        else:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise DatabaseError(f"Cannot open the history file {path}: {exc}.") from exc
    try:
        _apply_pragmas(conn, read_only=read_only)
    except sqlite3.Error as exc:
        conn.close()
        raise DatabaseError(f"Cannot open the history file {path}: {exc}.") from exc
    return sqlite_utils.Database(conn)


def _apply_pragmas(conn: sqlite3.Connection, *, read_only: bool) -> None:
    # Durability invariant: WAL + synchronous=FULL keeps every commit through power loss;
    # foreign keys are per connection and off by default, so they are set here each time.
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if read_only:
        conn.execute("PRAGMA query_only=ON")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA checkpoint_fullfsync=ON")  # matters on macOS; ignored elsewhere
    conn.execute("PRAGMA foreign_keys=ON")


def _inspect(path: Path) -> tuple[bool, int, list[str]]:
    """Read-only health check: (damaged?, user_version, applied migration names)."""
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise DatabaseError(f"Cannot open the history file {path}: {exc}.") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        result = [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchall()]
        if result != ["ok"]:
            return True, 0, []
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        has_table = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (MIGRATIONS_TABLE,)).fetchone()
        names = [str(r[0]) for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")] if has_table else []
        return False, version, names
    except sqlite3.DatabaseError as exc:
        if _is_damage(exc):
            return True, 0, []
        raise DatabaseError(f"Cannot read the history file {path}: {exc}.") from exc
    finally:
        conn.close()


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _move_aside(path: Path) -> Path:
    """Rename the file and its sidecars to `<name>.corrupt-<UTC timestamp>`; never delete."""
    try:
        return move_database_aside(path)
    except OSError as exc:
        raise DatabaseError(f"The history file {path} is damaged and could not be moved aside: {exc}.") from exc


def _backup_before_migrating(path: Path, version: int) -> None:
    """VACUUM INTO `<name>.pre-v<version>` once, so a schema update can always be undone."""
    target = path.with_name(f"{path.name}.pre-v{version}")
    if target.exists():
        return
    db = _connect(path, read_only=False)
    try:
        db.conn.execute("VACUUM INTO ?", (str(target),))
    except sqlite3.Error as exc:
        target.unlink(missing_ok=True)
        raise DatabaseError(f"Could not back up the history file before updating it: {exc}.") from exc
    finally:
        db.close()
