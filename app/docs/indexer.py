"""Indexing a collection: its roots walked, new and changed files read (readers), cut (chunker) and
written, then embedded when an embedder is given; files that are gone removed; problems recorded.

Invariants:
- A file's passages are written a batch at a time, each batch a transaction of its own
  (app/docs/file_rows.py), so the index's write lock is never held while a file is read and a
  run stopped or killed part way keeps what it wrote; the next run reads that file again. Files a
  run found but has not read yet are rows with status 'pending'. Vectors are made once every
  file of the run is written (so the whole collection is searchable by keywords first, and by
  meaning as its vectors arrive), in transactions of their own, a batch at a time (the model
  embeds outside any write lock); chunks a stopped run left without vectors are embedded by the
  next run.
- Reading one file is bounded (app/docs/readers/limits.py: time, PDF content unpacked, characters);
  a file that reaches a limit is cut there, indexed up to it, and gets a sentence saying where.
- A file is read again only when its size or mtime changed and then its content's sha256 too (a
  touched file keeps its chunks). Vectors are reused by chunk hash from any chunk still in the
  index, so a renamed file is not embedded again (an edited file's old chunks, and their vectors,
  are dropped when it is read again).
- Any thread may run it: it opens its own connection. `hold()` true pauses it between files,
  between batches of a file and between embedding batches (a reply is streaming);
  `should_stop()` ends it between files or batches. On Linux the thread that runs it lowers its
  own priority.
- The files themselves are only read, never written, moved or copied; each is opened without
  blocking and read only when what was opened is a regular file.
- The walk keeps only the files the collection's patterns keep (app/docs/patterns.py); what it left
  out, with why, replaces the last walk's list in the index (`left_out`) before any file is read,
  and a file indexed before that a pattern now leaves out is removed like a deleted one.
- Progress goes out at each file, and within a PDF at most every PAGE_REPORT_S (its page of pages).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from app.docs.chunker import chunk_sections
from app.docs.embedding import Embedder
from app.docs.file_names import shown_path
from app.docs.file_rows import ClaimLost, FileRows, Known
from app.docs.index_db import DocumentIndex
from app.docs.patterns import Patterns
from app.docs.readers import NotRegular, NotTheSame, Unreadable, is_supported, read_sections, too_large
from app.docs.readers._base import open_checked
from app.docs.readers.limits import AT_START, DEFAULT_LIMITS, Budget, Cut, Limits
from app.docs.types import Chunk, FileProblem, Progress, Section
from app.docs.walk import Found, walk_roots
from models.transactions import write_transaction

EMBED_BATCH = 16
WRITE_BATCH = 128  # chunks held in memory at a time while a file is written or embedded
HOLD_POLL_S = 0.1
PAGE_REPORT_S = 0.25  # a PDF's page is reported at most this often
_NICE = 10
CHANGED_KIND = "is no longer a regular file (it became a pipe, device, socket or folder while Cove was indexing), so it is skipped"
REPLACED = "was replaced by another file or a link while Cove was indexing, so it is skipped"
EMBED_FAILED = "was indexed for keyword search only: embedding failed"
SAME_NAME = "has a name that is not UTF-8 and reads, escaped, like another file's name beside it, so it is left out"


def index_collection(
    index_path: Path,
    name: str,
    *,
    embedder: Embedder | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    hold: Callable[[], bool] | None = None,
    lower_priority: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> Progress:
    """Bring collection `name` up to date with its files; the last Progress (finished, or paused
    when `should_stop()` ended it early). `limits`: how much reading one file may take.
    UnknownCollection when there is no such collection."""
    if lower_priority:
        _lower_thread_priority()
    index = DocumentIndex(index_path)
    try:
        return _Run(index, name, embedder, on_progress, should_stop, hold, limits).run()
    finally:
        index.close(tidy=True)


class _Run:
    def __init__(
        self,
        index: DocumentIndex,
        name: str,
        embedder: Embedder | None,
        on_progress: Callable[[Progress], None] | None,
        should_stop: Callable[[], bool] | None,
        hold: Callable[[], bool] | None,
        limits: Limits,
    ) -> None:
        self.index, self.name, self.embedder, self.limits = index, name, embedder, limits
        self._on_progress, self._should_stop, self._hold = on_progress, should_stop, hold
        self.rows = FileRows(index, name, embedder.model_name if embedder is not None else None)
        self.progress = Progress(collection=name, files_done=0, files_total=0)
        self.problems: dict[str, str] = {}  # the collection's problems as of now, by shown path
        self.same_name: dict[str, str] = {}  # files this run leaves out without a row of their own (SAME_NAME)
        self._page_sent = 0.0  # when a page of the file being read was last reported (monotonic)
        self.embed_failure: str | None = None  # after one failure the run stops asking the embedder
        self.failed_ids: set[int] = set()  # files indexed this run without vectors

    # ---- the run ----------------------------------------------------------------------------

    def run(self) -> Progress:
        info = self.index.require(self.name)
        if self.embedder is not None and info.embedding_model != self.embedder.model_name:
            self._switch_model(self.embedder.model_name)
        known = self.rows.known()
        self.problems = {
            str(p): str(s)
            for p, s in self.index.conn.execute(
                "SELECT path, problem FROM files WHERE collection = ? AND problem IS NOT NULL", (self.name,)
            )
        }
        walked = list(walk_roots(info.roots, is_supported, Patterns.stored(info.include, info.exclude)))
        left_out = tuple(sorted((FileProblem(shown_path(f.path), f.left_out) for f in walked if f.left_out), key=lambda p: p.path))
        self.index.set_left_out(self.name, left_out)
        self.progress = replace(self.progress, left_out=left_out)
        found = self._one_per_name(f for f in walked if f.left_out is None)
        found_paths = {f.path for f in found}
        todo = [f for f in found if f.problem is None and _changed(known.get(f.path), f)]
        self._walk_problems([f for f in found if f.problem is not None], known)
        self.rows.mark_pending([f.path for f in todo if f.path not in known])
        self._report(files_total=len(todo), bytes_total=sum(f.size for f in todo))
        for f in todo:
            if self._stopping():
                return self._report(paused=True, current=None)
            shown = shown_path(f.path)
            self._report(current=shown, page=0, pages=0)
            self.problems.pop(shown, None)
            if not self._index_file(f, self.rows.known_one(f.path)):
                return self._report(paused=True, current=None)
            self._report(files_done=self.progress.files_done + 1, bytes_done=self.progress.bytes_done + f.size, page=0, pages=0)
        if self.embedder is not None and not self._fill_vectors():
            return self._report(paused=True, current=None)
        gone = [p for p in known if p not in found_paths]
        self.rows.remove(gone)
        for path in gone:
            self.problems.pop(shown_path(path), None)
        return self._report(finished=True, current=None)

    def _index_file(self, f: Found, old: Known | None) -> bool:
        """Read, cut and write one file (or record its problem). False: the run was stopped part
        way through it."""
        too_big = too_large(f.size)
        if too_big is not None:  # said before it is hashed: a 2 GB file is not read at all
            self._write_problem(f, None, too_big)
            return True
        try:
            digest = _sha256(f.path, _identity(f))
        except Unreadable as exc:
            self._write_problem(f, None, _sentence(exc))
            return True
        if old is not None and old.status == "indexed" and old.sha256 == digest:
            self.rows.touch(old.id, f)
            return True
        try:
            written = self._write_file(f, digest, Budget(self.limits))
        except sqlite3.Error:
            raise  # the index itself (a full disk): not this file's problem
        except ClaimLost:
            return True  # another run took the file over and writes it
        except Unreadable as exc:
            self._write_problem(f, digest, _sentence(exc))
            return True
        except OSError as exc:
            self._write_problem(f, digest, _os_sentence(exc))
            return True
        except Exception as exc:  # a reader's bug must not end the run: the file gets a sentence
            self._write_problem(f, digest, f"could not be read ({type(exc).__name__}: {exc})")
            return True
        if written is None:
            return False
        file_id, cut = written
        if cut is not None:
            self._problem(shown_path(f.path), cut)
        return True  # its vectors are made once every file is searchable by keywords (_fill_vectors)

    def _write_file(self, f: Found, digest: str, budget: Budget) -> tuple[int, str | None] | None:
        """The file's passages, streamed from the reader and written a batch at a time until the
        file ends or `budget` runs out: (its id, the sentence saying where it was cut, or None).
        None: the run was stopped between two batches (what was written is kept)."""
        file_id = self.rows.begin(f, digest)
        sections = read_sections(Path(f.path), budget, _identity(f), on_page=self._page)
        bounded = _within(sections, budget)
        chunks = chunk_sections(bounded)
        try:
            batch: list[Chunk] = []
            ord_ = 0
            for chunk in chunks:
                batch.append(chunk)
                if len(batch) >= WRITE_BATCH:
                    ord_ = self.rows.add(file_id, ord_, batch)
                    batch = []
                    with budget.paused():
                        if self._stopping():
                            return None
        finally:  # the reader's file closed now, also when the run stops part way (they are generators)
            for gen in (chunks, bounded, sections):
                getattr(gen, "close", lambda: None)()
        self.rows.finish(file_id, budget.cut, ord_, batch)  # the last batch, and the file done, together
        return file_id, budget.cut

    # ---- vectors ----------------------------------------------------------------------------

    def _vectors(self, chunks: Sequence[Chunk]) -> tuple[dict[str, bytes], str | None]:
        """Vectors (float32 BLOBs by chunk hash) for `chunks`: those already in the index reused,
        the rest embedded; and a sentence when embedding failed (the file is indexed without)."""
        if self.embedder is None or not chunks:
            return {}, None
        if self.embed_failure is not None:
            return {}, self.embed_failure
        model = self.embedder.model_name
        have = self.rows.stored_vectors(model, {c.hash for c in chunks})
        missing = list({c.hash: c.text for c in chunks if c.hash not in have}.items())
        for i in range(0, len(missing), EMBED_BATCH):
            self._wait_while_held()
            batch = missing[i : i + EMBED_BATCH]
            try:
                out = self.embedder.embed([text for _, text in batch])
                if len(out) != len(batch):
                    raise ValueError(f"{len(out)} vectors came back for {len(batch)} texts")
            except Exception as exc:
                self.embed_failure = f"{EMBED_FAILED} ({exc})"
                return {}, self.embed_failure
            for (h, _), vec in zip(batch, out, strict=True):
                have[h] = np.asarray(vec, dtype="<f4").tobytes()
        return have, None

    def _switch_model(self, model: str) -> None:
        """Vectors of another model are dropped (never mixed with this one's); the files are
        embedded again by _fill_vectors."""
        with write_transaction(self.index.db):
            self.index.conn.execute(
                "DELETE FROM vectors WHERE model != ? AND chunk_id IN (SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE f.collection = ?)",
                (model, self.name),
            )
            self.index.conn.execute("UPDATE collections SET embedding_model = ? WHERE name = ?", (model, self.name))
            self.index.bump_generation()

    def _fill_vectors(self) -> bool:
        """Embed the chunks of indexed files that have no vector of the embedder's model (files
        indexed before there was one, with another, or by a run that was stopped). False: stopped."""
        assert self.embedder is not None
        rows = self.index.conn.execute(
            "SELECT f.id, f.path, count(*) FROM files f JOIN chunks c ON c.file_id = f.id "
            "LEFT JOIN vectors v ON v.chunk_id = c.id AND v.model = ? "
            "WHERE f.collection = ? AND f.status = 'indexed' AND v.chunk_id IS NULL GROUP BY f.id ORDER BY f.path",
            (self.embedder.model_name, self.name),
        ).fetchall()
        self._report(vectors_done=0, vectors_total=sum(int(n) for _, _, n in rows))
        for file_id, path, _ in rows:
            if file_id in self.failed_ids:
                continue
            if self._stopping():
                return False
            self._report(current=str(path), page=0, pages=0)
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
                (model, file_id, after, WRITE_BATCH),
            ).fetchall()
            if not rows:
                break
            after = int(rows[-1][0])
            vectors, problem = self._vectors([Chunk(text=t, start=0, end=0, hash=h) for _, h, t in rows])
            with write_transaction(self.index.db):
                if problem is not None:  # a sentence saying where the file was cut stays the one it shows
                    if self.index.conn.execute(
                        "UPDATE files SET problem = ? WHERE id = ? AND (problem IS NULL OR problem LIKE ?)",
                        (problem, file_id, EMBED_FAILED + "%"),
                    ).rowcount:
                        self._problem(path, problem)
                    self.failed_ids.add(file_id)
                    return
                self.rows.insert_vectors([(cid, vectors[h]) for cid, h, _ in rows], model)
                self.index.bump_generation()
            self._report(vectors_done=self.progress.vectors_done + len(rows))
        with write_transaction(self.index.db):
            if self.index.conn.execute(
                "UPDATE files SET problem = NULL WHERE id = ? AND problem LIKE ?", (file_id, EMBED_FAILED + "%")
            ).rowcount:
                self.problems.pop(path, None)

    # ---- problems ---------------------------------------------------------------------------

    def _write_problem(self, f: Found, digest: str | None, sentence: str) -> None:
        self.rows.problem(f, digest, sentence)
        self._problem(shown_path(f.path), sentence)

    def _walk_problems(self, found: Sequence[Found], known: dict[str, Known]) -> None:
        """Paths the walk could not take: recorded (once; again only when the sentence changes)."""
        for f in found:
            assert f.problem is not None
            shown = shown_path(f.path)
            if f.path not in known or known[f.path].status != "problem" or self.problems.get(shown) != f.problem:
                self._write_problem(f, None, f.problem)
            else:
                self._problem(shown, f.problem)

    def _one_per_name(self, found: Iterable[Found]) -> list[Found]:
        """`found`, leaving out a file whose shown name another has already (a name that is not
        UTF-8, its bytes escaped, can read like another's): the index keys files by that name."""
        kept: dict[str, Found] = {}
        for f in found:
            shown = shown_path(f.path)
            if shown in kept:
                self.same_name[shown] = SAME_NAME
                continue
            kept[shown] = f
        return list(kept.values())

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
        return tuple(FileProblem(p, s) for p, s in sorted({**self.same_name, **self.problems}.items()))

    def _page(self, number: int, count: int) -> None:
        """The reader is at page `number` of `count` of the file being read: reported at most
        every PAGE_REPORT_S, and the first page at once."""
        self.progress = replace(self.progress, page=number, pages=count)
        now = time.monotonic()
        if number <= 1 or now - self._page_sent >= PAGE_REPORT_S:
            self._page_sent = now
            self._report()

    def _report(self, **changes: object) -> Progress:
        self.progress = replace(self.progress, problems=self._problem_list(), **changes)  # type: ignore[arg-type]
        if self._on_progress is not None:
            self._on_progress(self.progress)
        return self.progress


def _changed(known: Known | None, f: Found) -> bool:
    return known is None or known.status in ("pending", "reading") or known.size != f.size or known.mtime_ns != f.mtime_ns


def _within(sections: Iterable[Section], budget: Budget) -> Iterator[Section]:
    """`sections` until `budget` runs out (time and characters looked at before each; a Cut the
    reader raises itself ends them too): `budget.cut` then says where and why. They end without
    an error, so the chunker gives out the text it holds before the cut."""
    try:
        for section in sections:
            if section.page is not None:
                where = f"at page {section.page:,}"
            else:
                where = f"after {section.start:,} characters" if section.start else AT_START
            budget.check_time(where)
            budget.take_text(len(section.text), where)
            yield section
    except Cut as cut:
        budget.cut = str(cut)


def _sentence(exc: Unreadable) -> str:
    """The file's sentence; the walk found a regular file, so one that is no longer it changed since."""
    if isinstance(exc, NotRegular):
        return CHANGED_KIND
    if isinstance(exc, NotTheSame):
        return REPLACED
    return str(exc)


def _identity(f: Found) -> tuple[int, int] | None:
    """The file as the walk found it (st_dev, st_ino), when the walk said."""
    return (f.dev, f.ino) if f.ino else None


def _sha256(path: str, identity: tuple[int, int] | None) -> str:
    """The SHA-256 of the file's content; Unreadable (NotRegular, NotTheSame: not the regular file found)."""
    digest = hashlib.sha256()
    with open_checked(path, identity) as fh:
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
