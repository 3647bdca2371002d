"""Indexing: new files read, unchanged and touched files left alone, edits, renames and deletions
followed, problems recorded with their sentence while the run goes on, hold() and should_stop()
obeyed between files, and the files themselves never changed."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path

import pytest

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from app.docs.types import Progress
from tests.support.docs_text import text_rows, texts_in_step

pytestmark = pytest.mark.timeout(120)


def write_notes(folder: Path, n: int = 6) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nThis note talks about topic{i} at length.\n\n## More\n\nDetail{i} here.\n")
    (folder / "plain.txt").write_text("Plain words about pelicans.\n")
    (folder / "image.png").write_bytes(b"\x89PNG not read")  # unsupported suffix: left out unread, listed


def setup(tmp_path: Path, n: int = 6) -> tuple[Path, Path]:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    write_notes(docs, n)
    with DocumentIndex(db) as index:
        index.create("notes", [docs])
    return docs, db


def chunk_rows(db: Path) -> list[tuple[str, int, str]]:
    with DocumentIndex(db) as index:
        return [
            (str(p), int(i), str(h))
            for p, i, h in index.conn.execute(
                "SELECT f.path, c.id, c.hash FROM chunks c JOIN files f ON f.id = c.file_id ORDER BY f.path, c.ord"
            )
        ]


def read_counts(db: Path) -> dict[str, int]:
    """How often each file was read (by the chunks' ids: a file read again gets new ids)."""
    out: dict[str, int] = {}
    for path, cid, _ in chunk_rows(db):
        out[path] = max(out.get(path, 0), cid)
    return out


def fts_in_step(db: Path) -> None:
    with DocumentIndex(db) as index:
        texts_in_step(index)


def test_first_run_then_incremental_edit_touch_rename_delete(tmp_path: Path) -> None:
    docs, db = setup(tmp_path)
    seen: list[Progress] = []
    done = index_collection(db, "notes", on_progress=seen.append)
    assert done.finished and done.files_done == done.files_total == 7 and done.problems == ()
    assert any(p.current and p.current.endswith("note3.md") for p in seen)
    with DocumentIndex(db) as index:
        status = index.status("notes")
        assert status.files_indexed == 7 and status.chunks >= 7 and status.pending == 0 and status.last_indexed
        assert search(index, ["notes"], "pelicans")[0].path == str(docs / "plain.txt")
    first = chunk_rows(db)

    # Nothing changed: nothing is read again.
    again = index_collection(db, "notes")
    assert again.files_total == 0 and chunk_rows(db) == first

    # Touched with the same content: hashed, not re-chunked.
    os.utime(docs / "note1.md", ns=(1, 1))
    touched = index_collection(db, "notes")
    assert touched.files_total == 1 and chunk_rows(db) == first

    # Edited: that file alone is read again.
    (docs / "note2.md").write_text("# Note 2\n\nNow about walruses instead.\n")
    index_collection(db, "notes")
    after = chunk_rows(db)
    assert [r for r in after if not r[0].endswith("note2.md")] == [r for r in first if not r[0].endswith("note2.md")]
    with DocumentIndex(db) as index:
        assert search(index, ["notes"], "walruses")[0].path == str(docs / "note2.md")
        assert not search(index, ["notes"], "topic2")

    # Renamed and deleted.
    (docs / "note3.md").rename(docs / "renamed.md")
    (docs / "note4.md").unlink()
    index_collection(db, "notes")
    paths = {r[0] for r in chunk_rows(db)}
    assert str(docs / "renamed.md") in paths and str(docs / "note3.md") not in paths and str(docs / "note4.md") not in paths
    with DocumentIndex(db) as index:
        found = search(index, ["notes"], "topic3")
        assert [p.path for p in found] == [str(docs / "renamed.md")]
        assert index.status("notes").files_indexed == 6
    fts_in_step(db)


def test_problems_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    docs, db = setup(tmp_path)
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)
    locked = docs / "locked.md"
    locked.write_text("# Secret\n\nlocked away\n")
    locked.chmod(0)
    os.mkfifo(docs / "pipe.txt")
    (docs / "sub").mkdir()
    (docs / "sub" / "up").symlink_to(docs)  # a loop
    (docs / "self.txt").symlink_to(docs / "self.txt")  # a link to itself
    try:
        done = index_collection(db, "notes")
    finally:
        locked.chmod(0o644)
    problems = {Path(p.path).name: p.sentence for p in done.problems}
    assert problems["binary.txt"] == "looks like a binary file, not text"
    if os.geteuid() != 0:
        assert "permission denied" in problems["locked.md"]
    assert "not a regular file" in problems["pipe.txt"]
    assert "loop" in problems["up"] and "loop" in problems["self.txt"]
    assert done.files_done >= 7
    with DocumentIndex(db) as index:
        status = index.status("notes")
        assert {Path(p.path).name for p in status.problems} >= {"binary.txt", "pipe.txt", "up", "self.txt"}
        assert status.files_indexed >= 7
    # A second run does not read the problem files again, and still lists them.
    second = index_collection(db, "notes")
    assert second.files_total == 0
    assert {Path(p.path).name for p in second.problems} >= {"binary.txt", "up"}


def test_should_stop_pauses_between_files_and_the_next_run_resumes(tmp_path: Path) -> None:
    _, db = setup(tmp_path, n=10)
    calls = {"n": 0}

    def stop_after_three() -> bool:
        return calls["n"] >= 3

    def count(p: Progress) -> None:
        calls["n"] = p.files_done

    paused = index_collection(db, "notes", on_progress=count, should_stop=stop_after_three)
    assert paused.paused and not paused.finished and paused.files_done == 3
    with DocumentIndex(db) as index:
        status = index.status("notes")
        assert status.files_indexed == 3 and status.pending == 8
    resumed = index_collection(db, "notes")
    assert resumed.finished and resumed.files_total == 8
    with DocumentIndex(db) as index:
        assert index.status("notes").pending == 0 and index.status("notes").files_indexed == 11
    fts_in_step(db)


def test_hold_waits_between_files_until_released(tmp_path: Path) -> None:
    _, db = setup(tmp_path, n=3)
    holding = threading.Event()
    holding.set()
    waited = threading.Event()
    progress: list[Progress] = []

    def hold() -> bool:
        if holding.is_set():
            waited.set()
        return holding.is_set()

    result: list[Progress] = []
    worker = threading.Thread(target=lambda: result.append(index_collection(db, "notes", hold=hold, on_progress=progress.append)))
    worker.start()
    assert waited.wait(30)
    assert all(p.files_done == 0 for p in progress)  # nothing read while held
    holding.clear()
    worker.join(60)
    assert result and result[0].finished and result[0].files_done == 4


def test_the_files_are_never_changed(tmp_path: Path) -> None:
    docs, db = setup(tmp_path)

    def snapshot() -> dict[str, tuple[str, int]]:
        return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in sorted(docs.rglob("*"))}

    before = snapshot()
    index_collection(db, "notes")
    with DocumentIndex(db) as index:
        index.remove("notes")
    assert snapshot() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "documents.db"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")
def test_the_indexing_thread_lowers_its_own_priority_only(tmp_path: Path) -> None:
    _, db = setup(tmp_path, n=1)
    seen: list[int] = []
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def note(_p: Progress) -> None:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    worker = threading.Thread(target=index_collection, args=(db, "notes"), kwargs={"on_progress": note})
    worker.start()
    worker.join(60)
    assert seen and all(v >= 10 for v in seen)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # this thread is untouched


def test_a_large_file_is_written_a_batch_of_passages_at_a_time(tmp_path: Path) -> None:
    """Memory while indexing does not grow with the file: 40 MB of text held whole would be
    tens of MB of Python strings; streamed, the peak stays a few MB (tracemalloc, a count)."""
    import tracemalloc

    folder = tmp_path / "big"
    folder.mkdir()
    line = "The harbour ledger lists every schooner, its berth and the dues it paid that season.\n"
    with open(folder / "ledger.txt", "w") as fh:
        for i in range(540_000):
            fh.write(line if i % 9 else "\n")
    assert (folder / "ledger.txt").stat().st_size > 40_000_000
    path = tmp_path / "documents.db"
    with DocumentIndex(path) as index:
        index.create("big", [folder])
    tracemalloc.start()
    try:
        done = index_collection(path, "big", lower_priority=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert done.finished
    with DocumentIndex(path) as index:
        assert index.status("big").chunks > 40_000
    assert peak < 8_000_000, peak


def test_two_runs_of_one_collection_at_once_leave_it_whole(tmp_path: Path) -> None:
    """The window's worker and a `cove docs reindex` may index the same collection at once: each
    file is written once, the full-text index stays in step, nothing is left pending."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(40):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"The harbour ledger line {i}.\n\n" * 600)
    path = tmp_path / "documents.db"
    with DocumentIndex(path) as index:
        index.create("notes", [folder])
    errors: list[BaseException] = []

    def run() -> None:
        try:
            assert index_collection(path, "notes", lower_priority=False).finished
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    runs = [threading.Thread(target=run) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(120)
    assert errors == []
    with DocumentIndex(path) as index:
        status = index.status("notes")
        assert (status.files_indexed, status.pending) == (40, 0)
        assert text_rows(index, "notes") == status.chunks
        assert (
            index.conn.execute(
                "SELECT count(*) FROM (SELECT file_id, ord FROM chunks GROUP BY file_id, ord HAVING count(*) > 1)"
            ).fetchone()[0]
            == 0
        )
        assert len(search(index, ["notes"], "ledger line 7")) > 0


def _pdf_of(pages: int) -> bytes:
    from tests.support.docs_corpus import _pdf

    return _pdf([[f"Page {n} of the ledger tells of puffin number {n}."] for n in range(1, pages + 1)])


class _Clock:
    """indexer.time.monotonic, moved by the test: `step` seconds at every reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize(("step", "shown"), [(0.0, [1]), (1.0, [1, 2, 3, 4, 5, 6])])
def test_a_pdfs_page_of_pages_is_reported_a_few_times_a_second_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: float, shown: list[int]
) -> None:
    from app.docs import indexer

    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    docs.mkdir()
    (docs / "ledger.pdf").write_bytes(_pdf_of(6))
    with DocumentIndex(db) as index:
        index.create("ledger", [docs])
    clock = _Clock(step)  # a clock that stands still: only the first page goes out; one past the limit: every page
    monkeypatch.setattr(indexer.time, "monotonic", clock.monotonic)
    seen: list[Progress] = []
    done = index_collection(db, "ledger", lower_priority=False, on_progress=seen.append)
    assert done.finished and done.problems == () and (done.page, done.pages) == (0, 0)
    pages = [(p.page, p.pages) for p in seen if p.pages]
    assert pages == [(n, 6) for n in shown]
    assert all(p.current and p.current.endswith("ledger.pdf") for p in seen if p.pages)


def test_indexed_at_is_when_a_file_was_done_not_when_it_was_begun(tmp_path: Path) -> None:
    from app.docs.file_rows import FileRows
    from app.docs.types import Chunk
    from app.docs.walk import Found

    docs, db = setup(tmp_path, n=1)
    with DocumentIndex(db) as index:
        rows = FileRows(index, "notes", None)
        path = str(docs / "plain.txt")
        found = Found(path, size=1, mtime_ns=1)

        def stamp() -> str | None:
            return index.conn.execute("SELECT indexed_at FROM files WHERE path = ?", (path,)).fetchone()[0]

        file_id = rows.begin(found, "d1")
        assert stamp() is None  # begun, not done: no time yet, and "last indexed" does not move
        assert index.status("notes").last_indexed is None
        chunk = Chunk(text="pelicans", start=0, end=8, hash="h1")
        rows.finish(file_id, None, 0, [chunk])
        first = stamp()
        assert first is not None and index.status("notes").last_indexed == first
        assert index.conn.execute("SELECT count(*) FROM chunks WHERE file_id = ?", (file_id,)).fetchone()[0] == 1
        rows.begin(found, "d2")  # read again: it keeps the time it was last done until it is done again
        assert stamp() == first
        rows.finish(file_id, None, 0, [chunk])
        assert stamp() is not None and stamp() >= first
