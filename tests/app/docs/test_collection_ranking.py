"""A collection's keyword ranking is its own: each collection has a full-text table of its own
(app/docs/text_tables.py), so adding, indexing and removing another collection never moves a
score or a place in it; and an index written before (one table for every collection) is brought
over with every passage searchable in its own collection."""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from app.docs.index_db import DocumentIndex
from app.docs.index_schema import MIGRATIONS
from app.docs.indexer import index_collection
from app.docs.search import bm25_ranked, fts_query, search
from app.store.migrations import apply_migrations
from tests.support.docs_text import texts_in_step

HARBOUR = {
    "tides.txt": "The harbour tide tables list high water. The tide turns twice a day.",
    "keeper.txt": "The keeper of the harbour logs each ship. Ships wait for the tide.",
    "moorings.txt": "Moorings are let by the season; the harbour master keeps the list.",
    "gulls.txt": "Gulls nest on the harbour wall in spring.",
}


def _folder(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _ranking(index: DocumentIndex, query: str) -> list[tuple[str, float]]:
    match = fts_query(query)
    assert match is not None
    ranked = bm25_ranked(index, ["harbour"], match, 20)
    paths = dict(index.conn.execute("SELECT c.id, f.path FROM chunks c JOIN files f ON f.id = c.file_id").fetchall())
    return [(Path(paths[i]).name, score) for i, score in ranked]


def test_adding_another_collection_moves_nothing_in_this_one(tmp_path: Path) -> None:
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as index:
        index.create("harbour", [_folder(tmp_path / "harbour", HARBOUR)])
    index_collection(db, "harbour", lower_priority=False)
    with DocumentIndex(db) as index:
        before = {q: _ranking(index, q) for q in ("harbour tide", "keeper ships", "gulls wall")}
    other = {f"log{i}.txt": "tide " * (i + 1) + "wall gulls ships keeper " * 30 + f"entry {i}" for i in range(40)}
    with DocumentIndex(db) as index:
        index.create("logs", [_folder(tmp_path / "logs", other)])
    index_collection(db, "logs", lower_priority=False)
    with DocumentIndex(db) as index:
        assert {q: _ranking(index, q) for q in before} == before  # the same places, the same scores
        assert search(index, ["harbour", "logs"], "harbour tide")  # both searched together still
        texts_in_step(index)
        index.remove("logs")
        assert {q: _ranking(index, q) for q in before} == before
        texts_in_step(index)


def test_an_index_with_one_table_for_every_collection_is_brought_over(tmp_path: Path) -> None:
    db_path = tmp_path / "documents.db"
    db = sqlite_utils.Database(db_path)
    apply_migrations(db, MIGRATIONS[:3])  # as Cove wrote it before 0004
    db.execute("INSERT INTO collections (name, created) VALUES ('a', '2026-01-01'), ('b', '2026-01-02')")
    for fid, (coll, text) in enumerate((("a", "the harbour tide"), ("b", "the kettle warranty"), ("a", "gulls on the wall")), start=1):
        db.execute("INSERT INTO files (id, collection, path, status) VALUES (?, ?, ?, 'indexed')", (fid, coll, f"/x/{fid}.txt"))
        row = (fid, text, len(text), f"h{fid}")
        db.execute('INSERT INTO chunks (file_id, ord, text, start, "end", hash) VALUES (?, 0, ?, 0, ?, ?)', row)
    db.conn.commit()
    db.close()
    with DocumentIndex(db_path) as index:
        texts_in_step(index)
        assert [p.path for p in search(index, ["a"], "harbour")] == ["/x/1.txt"]
        assert search(index, ["a"], "kettle") == [] and [p.path for p in search(index, ["b"], "kettle")] == ["/x/2.txt"]
        assert not index.conn.execute("SELECT name FROM sqlite_master WHERE name = 'chunks_fts'").fetchall()


def test_a_heading_that_names_the_question_counts_above_a_passing_mention(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path / "guide",
        {
            "tally.md": "# Counting words\n\nThe tally class keeps a number for each thing it is given.\n",
            "notes.txt": "Notes: counting words by hand is slow; counting words twice is slower.",
        },
    )
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as index:
        index.create("guide", [folder])
    index_collection(db, "guide", lower_priority=False)
    with DocumentIndex(db) as index:
        found = search(index, ["guide"], "counting words")
    assert [Path(p.path).name for p in found] == ["tally.md", "notes.txt"]
    assert found[0].heading == "Counting words"
