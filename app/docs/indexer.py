"""Indexing a collection: its roots walked, new and changed files read (readers), cut (chunker),
embedded when an embedder is given, and written; files that are gone removed; problems recorded.

Invariants:
- Each file is written in ONE transaction (its row, its chunks, their full-text rows, and the
  vectors the index already had for their hashes), streamed from the reader a batch of chunks at a
  time, so a run killed at any point loses at most the file in progress, and the next run
  resumes: files a run found but has not read yet are rows with status 'pending'. New vectors
  follow in transactions of their own, a batch at a time (the model embeds outside any write
  lock); chunks a stopped run left without vectors are embedded by the next run.
- A file is read again only when its size or mtime changed and then its content's sha256 too (a
  touched file keeps its chunks). Vectors are reused by chunk hash, so a renamed or edited file
  re-embeds only passages it did not have before.
- Any thread may run it: it opens its own connection. `hold()` true pauses it between files and
  embedding batches (a reply is streaming); `should_stop()` ends it between files. On Linux the
  thread that runs it lowers its own priority.
- The files themselves are only read, never written, moved or copied.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from app.docs.chunker import chunk_sections
from app.docs.embedding import Embedder
from app.docs.index_db import DocumentIndex
from app.docs.readers import Unreadable, is_supported, read_sections, too_large
from app.docs.types import Chunk, FileProblem, Progress
from app.docs.walk import Found, walk_roots
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

EMBED_BATCH = 16
WRITE_BATCH = 128  # chunks held in memory at a time while a file is written or embedded
HOLD_POLL_S = 0.1
_NICE = 10


@dataclass(frozen=True)
class _Known:
    id: int
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    status: str


def index_collection(index_path: Path, name: str, *, embedder: Embedder | None = None,
                     on_progress: Callable[[Progress], None] | None = None, should_stop: Callable[[], bool] | None = None,
                     hold: Callable[[], bool] | None = None, lower_priority: bool = True) -> Progress:
    """Bring collection `name` up to date with its files; the last Progress (finished, or paused
    when `should_stop()` ended it early). UnknownCollection when there is no such collection."""
    if lower_priority:
        _lower_thread_priority()
    index = DocumentIndex(index_path)
    try:
        return _Run(index, name, embedder, on_progress, should_stop, hold).run()
    finally:
        index.close(tidy=True)


class _Run:
    def __init__(self, index: DocumentIndex, name: str, embedder: Embedder | None,
                 on_progress: Callable[[Progress], None] | None, should_stop: Callable[[], bool] | None,
                 hold: Callable[[], bool] | None) -> None:
        self.index, self.name, self.embedder = index, name, embedder
        self._on_progress, self._should_stop, self._hold = on_progress, should_stop, hold
        self.progress = Progress(collection=name, files_done=0, files_total=0)
        self.problems: dict[str, str] = {}  # the collection's problems as of now, by path
        self.embed_failure: str | None = None  # after one failure the run stops asking the embedder
        self.failed_ids: set[int] = set()  # files indexed this run without vectors

    # ---- the run ----------------------------------------------------------------------------

    def run(self) -> Progress:
        info = self.index.require(self.name)
        if self.embedder is not None and info.embedding_model != self.embedder.model_name:
            self._switch_model(self.embedder.model_name)
        known = self._known()
        self.problems = {str(p): str(s) for p, s in self.index.conn.execute(
            "SELECT path, problem FROM files WHERE collection = ? AND problem IS NOT NULL", (self.name,))}
        found = list(walk_roots(info.roots, is_supported))
        found_paths = {f.path for f in found}
        todo = [f for f in found if f.problem is None and _changed(known.get(f.path), f)]
        self._walk_problems([f for f in found if f.problem is not None], known)
        self._mark_pending([f for f in todo if f.path not in known])
        self._report(files_total=len(todo), bytes_total=sum(f.size for f in todo))
        for f in todo:
            if self._stopping():
                return self._report(paused=True, current=None)
            self._report(current=f.path)
            self.problems.pop(f.path, None)
            self._index_file(f, self._known_one(f.path))
            self._report(files_done=self.progress.files_done + 1, bytes_done=self.progress.bytes_done + f.size)
        if self.embedder is not None and not self._fill_vectors():
            return self._report(paused=True, current=None)
        gone = [p for p in known if p not in found_paths]
        self._remove_gone(gone)
        for path in gone:
            self.problems.pop(path, None)
        return self._report(finished=True, current=None)

    def _index_file(self, f: Found, old: _Known | None) -> None:
        too_big = too_large(f.size)
        if too_big is not None:  # said before it is hashed: a 2 GB file is not read at all
            self._write_problem(f, None, too_big)
            return
        try:
            digest = _sha256(f.path)
        except OSError as exc:
            self._write_problem(f, None, _os_sentence(exc))
            return
        if old is not None and old.status == "indexed" and old.sha256 == digest:
            with write_transaction(self.index.db):  # touched, same content: keep its chunks
                self.index.conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?", (f.size, f.mtime_ns, old.id))
            return
        try:
            file_id = self._write_file(f, digest)
        except sqlite3.Error:
            raise  # the index itself (a full disk): not this file's problem
        except Unreadable as exc:
            self._write_problem(f, digest, str(exc))
            return
        except OSError as exc:
            self._write_problem(f, digest, _os_sentence(exc))
            return
        except Exception as exc:  # a reader's bug must not end the run: the file gets a sentence
            self._write_problem(f, digest, f"could not be read ({type(exc).__name__}: {exc})")
            return
        if self.embedder is not None:
            self._embed_file(file_id, f.path)

    # ---- vectors ----------------------------------------------------------------------------

    def _vectors(self, chunks: Sequence[Chunk]) -> tuple[dict[str, bytes], str | None]:
        """Vectors (float32 BLOBs by chunk hash) for `chunks`: those already in the index reused,
        the rest embedded; and a sentence when embedding failed (the file is indexed without)."""
        if self.embedder is None or not chunks:
            return {}, None
        if self.embed_failure is not None:
            return {}, self.embed_failure
        model = self.embedder.model_name
        have = self._stored_vectors(model, {c.hash for c in chunks})
        missing = list({c.hash: c.text for c in chunks if c.hash not in have}.items())
        for i in range(0, len(missing), EMBED_BATCH):
            self._wait_while_held()
            batch = missing[i:i + EMBED_BATCH]
            try:
                out = self.embedder.embed([text for _, text in batch])
                if len(out) != len(batch):
                    raise ValueError(f"{len(out)} vectors came back for {len(batch)} texts")
            except Exception as exc:
                self.embed_failure = f"was indexed for keyword search only: embedding failed ({exc})"
                return {}, self.embed_failure
            for (h, _), vec in zip(batch, out, strict=True):
                have[h] = np.asarray(vec, dtype="<f4").tobytes()
        return have, None

    def _stored_vectors(self, model: str, hashes: set[str]) -> dict[str, bytes]:
        have: dict[str, bytes] = {}
        ordered = sorted(hashes)
        for i in range(0, len(ordered), 500):
            part = ordered[i:i + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.index.conn.execute(
                    f"SELECT c.hash, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id "
                    f"WHERE v.model = ? AND c.hash IN ({marks})", (model, *part)):
                have[str(h)] = bytes(blob)
        return have

    def _switch_model(self, model: str) -> None:
        """Vectors of another model are dropped (never mixed with this one's); the files are
        embedded again by _fill_vectors."""
        with write_transaction(self.index.db):
            self.index.conn.execute(
                "DELETE FROM vectors WHERE model != ? AND chunk_id IN (SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE f.collection = ?)", (model, self.name))
            self.index.conn.execute("UPDATE collections SET embedding_model = ? WHERE name = ?", (model, self.name))
            self.index.bump_generation()

    def _fill_vectors(self) -> bool:
        """Embed the chunks of indexed files that have no vector of the embedder's model (files
        indexed before there was one, with another, or by a run that was stopped). False: stopped."""
        assert self.embedder is not None
        rows = self.index.conn.execute(
            "SELECT DISTINCT f.id, f.path FROM files f JOIN chunks c ON c.file_id = f.id "
            "LEFT JOIN vectors v ON v.chunk_id = c.id AND v.model = ? "
            "WHERE f.collection = ? AND f.status = 'indexed' AND v.chunk_id IS NULL ORDER BY f.path",
            (self.embedder.model_name, self.name)).fetchall()
        for file_id, path in rows:
            if file_id in self.failed_ids:
                continue
            if self._stopping():
                return False
            self._report(current=str(path))
            self._embed_file(int(file_id), str(path))
        return True

    def _embed_file(self, file_id: int, path: str) -> None:
        """Vectors for the file's chunks that have none, a batch at a time, each batch in a
        transaction of its own (the write lock is never held while the model embeds); a failure
        leaves the file indexed for keywords, with a sentence."""
        assert self.embedder is not None
        model = self.embedder.model_name
        after = 0
        while True:
            rows = self.index.conn.execute(
                "SELECT c.id, c.hash, c.text FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id AND v.model = ? "
                "WHERE c.file_id = ? AND v.chunk_id IS NULL AND c.id > ? ORDER BY c.id LIMIT ?",
                (model, file_id, after, WRITE_BATCH)).fetchall()
            if not rows:
                break
            after = int(rows[-1][0])
            vectors, problem = self._vectors([Chunk(text=t, start=0, end=0, hash=h) for _, h, t in rows])
            with write_transaction(self.index.db):
                if problem is not None:
                    self.index.conn.execute("UPDATE files SET problem = ? WHERE id = ?", (problem, file_id))
                    self._problem(path, problem)
                    self.failed_ids.add(file_id)
                    return
                self._insert_vectors([(cid, vectors[h]) for cid, h, _ in rows], model)
                self.index.bump_generation()
        with write_transaction(self.index.db):
            if self.index.conn.execute("UPDATE files SET problem = NULL WHERE id = ? AND problem IS NOT NULL",
                                       (file_id,)).rowcount:
                self.problems.pop(path, None)

    def _insert_vectors(self, rows: Sequence[tuple[int, bytes]], model: str) -> None:
        self.index.conn.executemany("INSERT OR REPLACE INTO vectors (chunk_id, model, dim, vector) VALUES (?, ?, ?, ?)",
                                    [(cid, model, len(blob) // 4, blob) for cid, blob in rows])

    # ---- writing ----------------------------------------------------------------------------

    def _write_file(self, f: Found, digest: str) -> int:
        """The file's row and its chunks, streamed from the reader into one transaction (a batch of
        chunks in memory at a time), with the vectors the index already has for their hashes."""
        conn = self.index.conn
        with write_transaction(self.index.db):
            file_id = self._upsert_file(f, digest, "indexed", None)
            conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
            batch: list[Chunk] = []
            ord_ = 0
            for chunk in chunk_sections(read_sections(Path(f.path))):
                batch.append(chunk)
                if len(batch) >= WRITE_BATCH:
                    ord_ = self._insert_chunks(file_id, ord_, batch)
                    batch = []
            self._insert_chunks(file_id, ord_, batch)
            self.index.bump_generation()
        return file_id

    def _insert_chunks(self, file_id: int, first: int, chunks: Sequence[Chunk]) -> int:
        ids: list[tuple[int, str]] = []
        for ord_, c in enumerate(chunks, first):
            cur = self.index.conn.execute('INSERT INTO chunks (file_id, ord, text, start, "end", page, heading, hash) '
                                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                          (file_id, ord_, c.text, c.start, c.end, c.page, c.heading, c.hash))
            assert cur.lastrowid is not None
            ids.append((cur.lastrowid, c.hash))
        if self.embedder is not None and ids:  # a renamed or edited file: passages it had keep their vectors
            have = self._stored_vectors(self.embedder.model_name, {h for _, h in ids})
            self._insert_vectors([(cid, have[h]) for cid, h in ids if h in have], self.embedder.model_name)
        return first + len(chunks)

    def _write_problem(self, f: Found, digest: str | None, sentence: str) -> None:
        with write_transaction(self.index.db):
            file_id = self._upsert_file(f, digest, "problem", sentence)
            if self.index.conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,)).rowcount:
                self.index.bump_generation()
        self._problem(f.path, sentence)

    def _upsert_file(self, f: Found, digest: str | None, status: str, problem: str | None) -> int:
        row = self.index.conn.execute(
            "INSERT INTO files (collection, path, size, mtime_ns, sha256, status, problem, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (collection, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
            "sha256 = excluded.sha256, status = excluded.status, problem = excluded.problem, indexed_at = excluded.indexed_at "
            "RETURNING id", (self.name, f.path, f.size, f.mtime_ns, digest, status, problem, utc_timestamp())).fetchone()
        return int(row[0])

    def _walk_problems(self, found: Sequence[Found], known: dict[str, _Known]) -> None:
        """Paths the walk could not take: recorded (once; again only when the sentence changes)."""
        for f in found:
            assert f.problem is not None
            row = self.index.conn.execute("SELECT problem FROM files WHERE collection = ? AND path = ?", (self.name, f.path)).fetchone()
            if row is None or row[0] != f.problem or f.path not in known or known[f.path].status != "problem":
                self._write_problem(f, None, f.problem)
            else:
                self._problem(f.path, f.problem)

    def _mark_pending(self, new: Sequence[Found]) -> None:
        """Files found and not yet read, so a status shows them (and a killed run's next run reads them)."""
        if new:
            with write_transaction(self.index.db):
                self.index.conn.executemany("INSERT OR IGNORE INTO files (collection, path, status) VALUES (?, ?, 'pending')",
                                            [(self.name, f.path) for f in new])

    def _remove_gone(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        with write_transaction(self.index.db):
            for path in paths:
                self.index.conn.execute("DELETE FROM files WHERE collection = ? AND path = ?", (self.name, path))
            self.index.bump_generation()

    # ---- reading the index ----------------------------------------------------------------

    def _known(self) -> dict[str, _Known]:
        return {str(r[0]): _Known(*r[1:]) for r in self.index.conn.execute(
            "SELECT path, id, size, mtime_ns, sha256, status FROM files WHERE collection = ?", (self.name,))}

    def _known_one(self, path: str) -> _Known | None:
        row = self.index.conn.execute("SELECT id, size, mtime_ns, sha256, status FROM files WHERE collection = ? AND path = ?",
                                      (self.name, path)).fetchone()
        return _Known(*row) if row is not None else None

    # ---- pacing and progress ----------------------------------------------------------------

    def _stopping(self) -> bool:
        self._wait_while_held()
        return self._should_stop is not None and self._should_stop()

    def _wait_while_held(self) -> None:
        while self._hold is not None and self._hold():
            if self._should_stop is not None and self._should_stop():
                return
            time.sleep(HOLD_POLL_S)

    def _problem(self, path: str, sentence: str) -> None:
        self.problems[path] = sentence
        self.progress = replace(self.progress, problems=self._problem_list())

    def _problem_list(self) -> tuple[FileProblem, ...]:
        return tuple(FileProblem(p, s) for p, s in sorted(self.problems.items()))

    def _report(self, **changes: object) -> Progress:
        self.progress = replace(self.progress, problems=self._problem_list(), **changes)  # type: ignore[arg-type]
        if self._on_progress is not None:
            self._on_progress(self.progress)
        return self.progress


def _changed(known: _Known | None, f: Found) -> bool:
    return known is None or known.status == "pending" or known.size != f.size or known.mtime_ns != f.mtime_ns


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _os_sentence(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)"
    if isinstance(exc, FileNotFoundError):
        return "was removed while it was being indexed"
    return f"cannot be read ({exc.strerror or exc})"


def _lower_thread_priority() -> None:
    """On Linux, nice the calling thread (not the process) so indexing yields to the window and
    the engine; elsewhere, or when not allowed, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < _NICE:
            os.setpriority(os.PRIO_PROCESS, tid, _NICE)
    except (OSError, AttributeError):
        pass
