"""Kill -9 during indexing: a real child process indexing a folder is killed with SIGKILL part way;
every file it reported done is still in the index, the index is consistent (full-text rows in step
with chunks), and the next run reads only the rest, with no duplicate chunks. Killed part way through
one large file, the batches it wrote are kept and searchable, and the next run reads that file whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from tests.support.docs_text import text_rows, texts_in_step

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[3]


def kill_when(child_code: str, db: Path, enough: Callable[[str], bool]) -> None:
    """Run `child_code` on the index at `db` in a child process, read its lines until `enough`
    says so, and kill it with SIGKILL there."""
    child = subprocess.Popen(
        [sys.executable, "-c", child_code, str(db)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    for line in child.stdout:
        if enough(line):
            break
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL


CHILD = """
import sys, time
from pathlib import Path
from app.docs.indexer import index_collection

def report(p):
    print(f"done {p.files_done} {p.current or ''}", flush=True)
    time.sleep(0.02)  # slow enough that the parent's kill lands mid-run

index_collection(Path(sys.argv[1]), "big", on_progress=report)
print("finished", flush=True)
"""


def test_kill_9_loses_nothing_indexed_and_the_next_run_resumes(tmp_path: Path) -> None:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    docs.mkdir()
    n_files = 200
    for i in range(n_files):
        paras = "\n\n".join(f"File {i} paragraph {j} mentions marker{i} and some filler words to make it longer." * 4 for j in range(12))
        (docs / f"f{i:03}.md").write_text(f"# File {i}\n\n{paras}\n")
    with DocumentIndex(db) as index:
        index.create("big", [docs])

    reported = 0

    def twenty_done(line: str) -> bool:
        nonlocal reported
        if line.startswith("done "):
            reported = max(reported, int(line.split()[1]))
        return reported >= 20

    kill_when(CHILD, db, twenty_done)
    assert 20 <= reported < n_files

    with DocumentIndex(db) as index:
        q = index.conn.execute
        assert q("PRAGMA integrity_check").fetchone()[0] == "ok"
        texts_in_step(index)
        done_before = {str(p): int(i) for p, i in q("SELECT path, id FROM files WHERE status = 'indexed'")}
        assert reported <= len(done_before) < n_files  # everything reported done survived; not everything was done
        chunk_ids_before = {int(r[0]) for r in q("SELECT id FROM chunks")}
        status = index.status("big")
        assert status.pending == n_files - len(done_before)

    resumed = index_collection(db, "big")
    assert resumed.finished and resumed.files_total == n_files - len(done_before)

    with DocumentIndex(db) as index:
        q = index.conn.execute
        texts_in_step(index)
        assert index.status("big").files_indexed == n_files and index.status("big").pending == 0
        # The files done before the kill were not read again (their chunks kept their ids) ...
        assert chunk_ids_before <= {int(r[0]) for r in q("SELECT id FROM chunks")}
        # ... and no file has its chunks twice.
        assert q("SELECT count(*) FROM (SELECT file_id, ord FROM chunks GROUP BY file_id, ord HAVING count(*) > 1)").fetchone()[0] == 0
        assert q("SELECT count(*) FROM (SELECT file_id, hash, start FROM chunks GROUP BY 1, 2, 3 HAVING count(*) > 1)").fetchone()[0] == 0
        n = q("SELECT count(*) FROM chunks").fetchone()[0]
        assert text_rows(index, "big") == n
        per_file = {int(c) for (c,) in q("SELECT count(*) FROM chunks GROUP BY file_id")}
        assert len(per_file) == 1  # every file (all alike in shape) cut into the same number of chunks
        for i in (0, n_files // 2, n_files - 1):
            found = search(index, ["big"], f"marker{i}", limit=1)
            assert found and found[0].path == str(docs / f"f{i:03}.md")


CHILD_ONE_FILE = """
import sys, time
from pathlib import Path
from app.docs.indexer import index_collection

def hold():  # asked between files and between the batches of one file
    print("between", flush=True)
    time.sleep(0.05)
    return False

index_collection(Path(sys.argv[1]), "ledger", hold=hold)
print("finished", flush=True)
"""


def test_kill_9_part_way_through_one_large_file_keeps_its_batches_and_the_next_run_reads_it_whole(tmp_path: Path) -> None:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    docs.mkdir()
    (docs / "ledger.txt").write_text("".join(f"Entry {i}: the schooner Marigold{i} paid its dues.\n\n" for i in range(40_000)))
    with DocumentIndex(db) as index:
        index.create("ledger", [docs])

    seen = 0

    def three_batches(line: str) -> bool:
        nonlocal seen
        seen += line.startswith("between")
        return seen >= 4  # before the file, then after three of its batches

    kill_when(CHILD_ONE_FILE, db, three_batches)

    with DocumentIndex(db) as index:
        q = index.conn.execute
        assert q("PRAGMA integrity_check").fetchone()[0] == "ok"
        texts_in_step(index)
        status, kept = q("SELECT f.status, count(c.id) FROM files f LEFT JOIN chunks c ON c.file_id = f.id GROUP BY f.id").fetchone()
        assert status == "reading" and kept >= 3 * 128  # what was written before the kill is there
        assert search(index, ["ledger"], "Marigold7")  # and searchable

    resumed = index_collection(db, "ledger")
    assert resumed.finished and resumed.files_total == 1
    with DocumentIndex(db) as index:
        q = index.conn.execute
        texts_in_step(index)
        assert index.status("ledger").files_indexed == 1 and index.status("ledger").pending == 0
        assert q("SELECT count(*) FROM (SELECT file_id, ord FROM chunks GROUP BY 1, 2 HAVING count(*) > 1)").fetchone()[0] == 0
        assert q("SELECT max(ord) + 1, count(*) FROM chunks").fetchone()[0] == q("SELECT count(*) FROM chunks").fetchone()[0]
        assert search(index, ["ledger"], "Marigold39999")
