"""The files of one collection as an indexing run writes them: a file's row (pending, reading,
indexed, problem) and its passages, a batch at a time, each batch a short write transaction of
its own, so the index's write lock is never held while a file is read.

Invariants (they cross processes: the window's worker and `cove docs reindex` may run at once):
- A file being written has status 'reading' and `claim` set to the run writing it; a batch or the
  end of the file is written only while the claim is still that run's (ClaimLost otherwise: a
  newer run took the file over and writes it whole), so two runs never mix their passages.
- A run stopped or killed part way leaves the file 'reading' with the passages written so far
  (searchable); the next run reads it again from the start.
- Rows are found by `path` (shown text) and `raw_path` together (app/docs/file_names.py).
- `indexed_at` is when the file was last done with: its last batch written (finish), or its
  problem recorded; claiming it for reading keeps the time it had, so "last indexed" is when
  the last file finished, not when one started.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from app.docs.file_names import os_path, raw_path, shown_path
from app.docs.index_db import DocumentIndex
from app.docs.types import Chunk
from app.docs.walk import Found
from models.timestamps import utc_timestamp
from models.transactions import write_transaction


class ClaimLost(Exception):
    """Another run took over the file this run was writing."""


@dataclass(frozen=True)
class Known:
    id: int
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    status: str


class FileRows:
    """One run's writes to the files of `collection`; `model`: the embedding model whose stored
    vectors new passages reuse by hash (None: no vectors)."""

    def __init__(self, index: DocumentIndex, collection: str, model: str | None) -> None:
        self.index, self.collection, self.model = index, collection, model
        self.claim = secrets.token_hex(8)
        self.text_id = index.text_id(collection)  # a passage's row names its collection's text table

    # ---- reading the rows -----------------------------------------------------------------

    def known(self) -> dict[str, Known]:
        """Every file of the collection, by its path as the OS takes it."""
        return {
            os_path(str(r[0]), r[1]): Known(*r[2:])
            for r in self.index.conn.execute(
                "SELECT path, raw_path, id, size, mtime_ns, sha256, status FROM files WHERE collection = ?", (self.collection,)
            )
        }

    def known_one(self, path: str) -> Known | None:
        row = self.index.conn.execute(
            "SELECT id, size, mtime_ns, sha256, status FROM files WHERE collection = ? AND path = ? AND raw_path IS ?",
            (self.collection, shown_path(path), raw_path(path)),
        ).fetchone()
        return Known(*row) if row is not None else None

    # ---- whole rows -----------------------------------------------------------------------

    def mark_pending(self, paths: Sequence[str]) -> None:
        """Files found and not yet read, so a status shows them (and a killed run's next run reads them)."""
        if paths:
            with write_transaction(self.index.db):
                self.index.conn.executemany(
                    "INSERT OR IGNORE INTO files (collection, path, raw_path, status) VALUES (?, ?, ?, 'pending')",
                    [(self.collection, shown_path(p), raw_path(p)) for p in paths],
                )

    def touch(self, file_id: int, f: Found) -> None:
        """Touched, same content: its passages kept, its size and mtime brought up to date."""
        with write_transaction(self.index.db):
            self.index.conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?", (f.size, f.mtime_ns, file_id))

    def problem(self, f: Found, digest: str | None, sentence: str) -> None:
        """The file left out, with its sentence; passages it had are removed."""
        with write_transaction(self.index.db):
            file_id = self._upsert(f, digest, "problem", sentence, None)
            if self.index.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,)).rowcount:
                self.index.bump_generation()

    def remove(self, paths: Sequence[str]) -> None:
        """Files gone from disk: their rows, passages and vectors."""
        if not paths:
            return
        with write_transaction(self.index.db):
            for path in paths:
                self.index.conn.execute(
                    "DELETE FROM files WHERE collection = ? AND path = ? AND raw_path IS ?",
                    (self.collection, shown_path(path), raw_path(path)),
                )
            self.index.bump_generation()

    # ---- a file's passages, a batch at a time ---------------------------------------------

    def begin(self, f: Found, digest: str) -> int:
        """Claim the file for this run ('reading') and drop the passages it had; its id."""
        with write_transaction(self.index.db):
            file_id = self._upsert(f, digest, "reading", None, self.claim, stamp=False)
            if self.index.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,)).rowcount:
                self.index.bump_generation()
        return file_id

    def add(self, file_id: int, first: int, chunks: Sequence[Chunk]) -> int:
        """Write `chunks` as passages `first`, `first` + 1, ...; the next ordinal. ClaimLost."""
        if not chunks:
            return first
        with write_transaction(self.index.db):
            self._check_claim(file_id)
            self._insert(file_id, first, chunks)
            self.index.bump_generation()
        return first + len(chunks)

    def finish(self, file_id: int, problem: str | None, first: int = 0, chunks: Sequence[Chunk] = ()) -> None:
        """The file's last passages (`chunks`, from ordinal `first`) written and the file indexed, in
        one transaction, so `indexed_at` is when its last batch was written (`problem`: the sentence
        saying where it was cut, or None). ClaimLost."""
        with write_transaction(self.index.db):
            self._check_claim(file_id)
            self._insert(file_id, first, chunks)
            self.index.conn.execute(
                "UPDATE files SET status = 'indexed', problem = ?, claim = NULL, indexed_at = ? WHERE id = ?",
                (problem, utc_timestamp(), file_id),
            )
            self.index.bump_generation()

    # ---- vectors already in the index ------------------------------------------------------

    def stored_vectors(self, model: str, hashes: set[str]) -> dict[str, bytes]:
        """The vectors of `model` the index has for chunks with these hashes (any collection)."""
        have: dict[str, bytes] = {}
        ordered = sorted(hashes)
        for i in range(0, len(ordered), 500):
            part = ordered[i : i + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.index.conn.execute(
                f"SELECT c.hash, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id WHERE v.model = ? AND c.hash IN ({marks})",
                (model, *part),
            ):
                have[str(h)] = bytes(blob)
        return have

    def insert_vectors(self, rows: Sequence[tuple[int, bytes]], model: str) -> None:
        self.index.conn.executemany(
            "INSERT OR REPLACE INTO vectors (chunk_id, model, dim, vector) VALUES (?, ?, ?, ?)",
            [(cid, model, len(blob) // 4, blob) for cid, blob in rows],
        )

    # ---- inside a write transaction -------------------------------------------------------

    def _insert(self, file_id: int, first: int, chunks: Sequence[Chunk]) -> None:
        ids: list[tuple[int, str]] = []
        for ord_, c in enumerate(chunks, first):
            cur = self.index.conn.execute(
                'INSERT INTO chunks (file_id, ord, text, start, "end", page, heading, hash, text_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
                (file_id, ord_, c.text, c.start, c.end, c.page, c.heading, c.hash, self.text_id),
            )
            assert cur.lastrowid is not None
            ids.append((cur.lastrowid, c.hash))
        if self.model is not None and ids:  # a renamed or edited file: passages it had keep their vectors
            have = self.stored_vectors(self.model, {h for _, h in ids})
            self.insert_vectors([(cid, have[h]) for cid, h in ids if h in have], self.model)

    def _check_claim(self, file_id: int) -> None:
        row = self.index.conn.execute("SELECT claim FROM files WHERE id = ?", (file_id,)).fetchone()
        if row is None or row[0] != self.claim:
            raise ClaimLost(file_id)

    def _upsert(self, f: Found, digest: str | None, status: str, problem: str | None, claim: str | None, *, stamp: bool = True) -> int:
        """The file's row written; `stamp`: `indexed_at` set to now (else a new row has none and an
        existing one keeps its own)."""
        row = self.index.conn.execute(
            "INSERT INTO files (collection, path, raw_path, size, mtime_ns, sha256, status, problem, indexed_at, claim) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (collection, path) DO UPDATE SET raw_path = excluded.raw_path, size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, status = excluded.status, problem = excluded.problem, "
            "indexed_at = coalesce(excluded.indexed_at, files.indexed_at), claim = excluded.claim RETURNING id",
            (
                self.collection,
                shown_path(f.path),
                raw_path(f.path),
                f.size,
                f.mtime_ns,
                digest,
                status,
                problem,
                utc_timestamp() if stamp else None,
                claim,
            ),
        ).fetchone()
        return int(row[0])
