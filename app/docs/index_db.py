"""The document index file (documents.db, beside the history): opening it with Cove's durable
settings, its collections (create, add roots, remove, list) and what each holds (status).

Thread invariant: a DocumentIndex is one SQLite connection and belongs to the thread that opened
it; the indexer and the window's searches open their own. The file is derived data: a damaged one
is moved aside and a new one started (the person reindexes), and it never touches the history.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from app.docs.index_schema import MIGRATIONS
from app.docs.text_tables import create_text_table, drop_text_table, text_table
from app.docs.types import FileProblem
from app.set_aside import move_database_aside
from app.store.migrations import MigrationError, apply_migrations
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

BUSY_TIMEOUT_MS = 5000


class DocumentIndexError(Exception):
    """The index file could not be opened or updated; the message is one sentence."""


class UnknownCollection(LookupError):
    """No collection of that name; the message is one sentence."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no collection named {name}; `cove docs list` shows them")
        self.name = name


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    created: str  # utc_timestamp()
    roots: tuple[str, ...]  # absolute paths of the folders and files, as added
    embedding_model: str | None  # the model its vectors come from; None: none yet (BM25 only)
    include: tuple[str, ...] | None = None  # the person's include patterns; None: every file a reader reads
    exclude: tuple[str, ...] | None = None  # the person's exclude patterns; None: the defaults


@dataclass(frozen=True)
class CollectionStatus:
    name: str
    roots: tuple[str, ...]
    files_indexed: int  # files whose passages are in the index
    chunks: int
    vectors: int  # chunks with a vector of `embedding_model`
    problems: tuple[FileProblem, ...]  # files left out (or indexed without vectors), with why
    pending: int  # files found by a run that has not read them (all) yet (a paused or stopped run)
    last_indexed: str | None  # when a file was last indexed; None: never
    embedding_model: str | None
    left_out: tuple[FileProblem, ...] = ()  # files the last walk left out unread (by pattern or type), with why


class DocumentIndex:
    """One connection to documents.db, schema brought up to date. `notice`: a sentence when a
    damaged file was moved aside, else None."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.notice: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DocumentIndexError(f"Cannot create the folder for the document index {self.path}: {exc}.") from exc
        try:
            self.db = _open(self.path)
        except DocumentIndexError:
            if not (self.path.exists() and _damaged(self.path)):
                raise
            moved = _move_aside(self.path)
            self.notice = f"The document index was damaged; it was moved to {moved} and a new one started."
            self.db = _open(self.path)

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def close(self, *, tidy: bool = False) -> None:
        """Close. `tidy` (the indexer, after a run): PRAGMA optimize and a truncating WAL checkpoint
        first, which may wait for other connections; a plain close never waits (a passive checkpoint)."""
        try:
            if self.conn.in_transaction:
                self.conn.rollback()
            if tidy:
                self.conn.execute("PRAGMA optimize")
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            pass  # best effort; every commit is already durable
        finally:
            self.db.close()

    def __enter__(self) -> DocumentIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- collections ----------------------------------------------------------------------

    def create(
        self, name: str, roots: Sequence[Path], *, include: Sequence[str] | None = None, exclude: Sequence[str] | None = None
    ) -> None:
        """A new collection of `roots` (folders or files), with the person's include and exclude
        patterns (None: the defaults). ValueError with a sentence: a bad or taken name, a path
        that does not exist."""
        name = _check_name(name)
        paths = _check_roots(roots)
        with write_transaction(self.db):
            if self._exists(name):
                raise ValueError(f"a collection named {name} already exists")
            text_id = int(self.conn.execute("SELECT coalesce(max(text_id), 0) + 1 FROM collections").fetchone()[0])
            self.conn.execute(
                "INSERT INTO collections (name, created, include_patterns, exclude_patterns, text_id) VALUES (?, ?, ?, ?, ?)",
                (name, utc_timestamp(), _patterns_json(include), _patterns_json(exclude), text_id),
            )
            create_text_table(self.conn, text_id)
            self.conn.executemany("INSERT OR IGNORE INTO roots (collection, path) VALUES (?, ?)", [(name, p) for p in paths])

    def add_roots(self, name: str, roots: Sequence[Path]) -> None:
        paths = _check_roots(roots)
        with write_transaction(self.db):
            self.require(name)
            self.conn.executemany("INSERT OR IGNORE INTO roots (collection, path) VALUES (?, ?)", [(name, p) for p in paths])

    def set_patterns(self, name: str, *, include: Sequence[str] | None, exclude: Sequence[str] | None) -> None:
        """The collection's include and exclude patterns (None: the defaults); the next run walks
        with them."""
        with write_transaction(self.db):
            self.require(name)
            self.conn.execute(
                "UPDATE collections SET include_patterns = ?, exclude_patterns = ? WHERE name = ?",
                (_patterns_json(include), _patterns_json(exclude), name),
            )

    def set_left_out(self, name: str, left_out: Sequence[FileProblem]) -> None:
        """The files the walk just left out unread, with why (replacing the last walk's)."""
        with write_transaction(self.db):
            self.conn.execute("DELETE FROM left_out WHERE collection = ?", (name,))
            rows = [(name, f.path, f.sentence) for f in left_out]
            self.conn.executemany("INSERT OR REPLACE INTO left_out (collection, path, reason) VALUES (?, ?, ?)", rows)

    def left_out(self, name: str) -> tuple[FileProblem, ...]:
        rows = self.conn.execute("SELECT path, reason FROM left_out WHERE collection = ? ORDER BY path", (name,))
        return tuple(FileProblem(str(p), str(r)) for p, r in rows)

    def remove(self, name: str) -> None:
        """The collection, its files' rows, chunks, vectors and full-text rows, then VACUUM so
        their text is gone from the file too. The files themselves are not touched."""
        with write_transaction(self.db):
            self.require(name)
            drop_text_table(self.conn, self.text_id(name))
            file_ids = "SELECT id FROM files WHERE collection = ?"
            self.conn.execute(f"DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE file_id IN ({file_ids}))", (name,))
            self.conn.execute(f"DELETE FROM chunks WHERE file_id IN ({file_ids})", (name,))
            self.conn.execute("DELETE FROM files WHERE collection = ?", (name,))
            self.conn.execute("DELETE FROM roots WHERE collection = ?", (name,))
            self.conn.execute("DELETE FROM left_out WHERE collection = ?", (name,))
            self.conn.execute("DELETE FROM collections WHERE name = ?", (name,))
            self.bump_generation()
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def text_id(self, name: str) -> int:
        """The number of the collection's full-text table (app/docs/text_tables.py); UnknownCollection."""
        row = self.conn.execute("SELECT text_id FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise UnknownCollection(name)
        return int(row[0])

    def text_table(self, name: str) -> str:
        """The collection's full-text table, e.g. for `MATCH`."""
        return text_table(self.text_id(name))

    def names(self) -> list[str]:
        return [str(r[0]) for r in self.conn.execute("SELECT name FROM collections ORDER BY name COLLATE NOCASE, name")]

    def collection(self, name: str) -> CollectionInfo | None:
        row = self.conn.execute(
            "SELECT name, created, embedding_model, include_patterns, exclude_patterns FROM collections WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            return None
        return CollectionInfo(
            name=row[0],
            created=row[1],
            roots=self.roots(name),
            embedding_model=row[2],
            include=_patterns_of(row[3]),
            exclude=_patterns_of(row[4]),
        )

    def require(self, name: str) -> CollectionInfo:
        """The collection, or UnknownCollection."""
        info = self.collection(name)
        if info is None:
            raise UnknownCollection(name)
        return info

    def roots(self, name: str) -> tuple[str, ...]:
        return tuple(str(r[0]) for r in self.conn.execute("SELECT path FROM roots WHERE collection = ? ORDER BY path", (name,)))

    def status(self, name: str) -> CollectionStatus:
        info = self.require(name)
        q = self.conn.execute
        files = int(q("SELECT count(*) FROM files WHERE collection = ? AND status = 'indexed'", (name,)).fetchone()[0])
        pending = int(q("SELECT count(*) FROM files WHERE collection = ? AND status IN ('pending', 'reading')", (name,)).fetchone()[0])
        chunks = int(q("SELECT count(*) FROM chunks JOIN files f ON f.id = chunks.file_id WHERE f.collection = ?", (name,)).fetchone()[0])
        vectors = 0
        if info.embedding_model:
            vectors = int(
                q(
                    "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id "
                    "WHERE f.collection = ? AND v.model = ?",
                    (name, info.embedding_model),
                ).fetchone()[0]
            )
        problems = tuple(
            FileProblem(str(p), str(s))
            for p, s in q("SELECT path, problem FROM files WHERE collection = ? AND problem IS NOT NULL ORDER BY path", (name,))
        )
        last = q("SELECT max(indexed_at) FROM files WHERE collection = ?", (name,)).fetchone()[0]
        return CollectionStatus(
            name=name,
            roots=info.roots,
            files_indexed=files,
            chunks=chunks,
            vectors=vectors,
            problems=problems,
            pending=pending,
            last_indexed=last,
            embedding_model=info.embedding_model,
            left_out=self.left_out(name),
        )

    # ---- for the indexer and search -----------------------------------------------------

    def generation(self) -> int:
        """Grows with every write that changes chunks or vectors (any collection)."""
        return int(self.conn.execute("SELECT generation FROM index_state WHERE id = 1").fetchone()[0])

    def bump_generation(self) -> None:
        """Inside a write transaction: mark chunks or vectors changed."""
        self.conn.execute("UPDATE index_state SET generation = generation + 1 WHERE id = 1")

    def _exists(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone() is not None


def _patterns_json(patterns: Sequence[str] | None) -> str | None:
    return None if patterns is None else json.dumps(list(patterns))


def _patterns_of(stored: str | None) -> tuple[str, ...] | None:
    if stored is None:
        return None
    try:
        value = json.loads(stored)
    except ValueError:
        return None  # unreadable: the defaults
    return tuple(str(p) for p in value) if isinstance(value, list) else None


def _check_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ValueError("a collection needs a name")
    if any(ord(c) < 32 for c in name) or len(name) > 200:
        raise ValueError("a collection's name must be one line of at most 200 characters")
    return name


def _check_roots(roots: Sequence[Path]) -> list[str]:
    if not roots:
        raise ValueError("a collection needs at least one folder or file")
    paths: list[str] = []
    for root in roots:
        path = Path(root).expanduser().absolute()
        if not path.exists():
            raise ValueError(f"{path} does not exist")
        if not (path.is_dir() or path.is_file()):
            raise ValueError(f"{path} is neither a folder nor a file")
        paths.append(str(path))
    return paths


def _open(path: Path) -> sqlite_utils.Database:
    """A connection with the schema up to date. DocumentIndexError with a sentence."""
    db = _connect(path)
    try:
        if int(db.conn.execute("PRAGMA user_version").fetchone()[0]) == len(MIGRATIONS):
            return db  # up to date: opening for a search takes no write lock
        apply_migrations(db, MIGRATIONS)
    except (MigrationError, sqlite3.DatabaseError) as exc:
        db.close()
        raise DocumentIndexError(f"Could not update the document index {path}: {exc}.") from exc
    return db


def _connect(path: Path) -> sqlite_utils.Database:
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=True)
        # Durability: WAL + synchronous=FULL keeps every commit (each file's transaction) through
        # a crash or power loss; foreign keys are per connection.
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise DocumentIndexError(f"Cannot open the document index {path}: {exc}.") from exc
    return sqlite_utils.Database(conn)


def _damaged(path: Path) -> bool:
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error:
        return False  # cannot open is not damage; _connect says what is wrong
    try:
        return [str(r[0]) for r in conn.execute("PRAGMA quick_check")] != ["ok"]
    except sqlite3.DatabaseError as exc:
        text = str(exc).lower()
        return "not a database" in text or "malformed" in text
    finally:
        conn.close()


def _move_aside(path: Path) -> Path:
    """Rename the file and its sidecars to `<name>.corrupt-<UTC timestamp>`; never delete."""
    try:
        return move_database_aside(path)
    except OSError as exc:
        raise DocumentIndexError(f"The document index {path} is damaged and could not be moved aside: {exc}.") from exc
