"""The document index file: collections created, listed, described and removed (with VACUUM),
names and paths checked with a sentence, the schema applied once, a damaged file moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.docs.index_db import CollectionInfo, DocumentIndex, UnknownCollection
from app.docs.indexer import index_collection
from tests.support.docs_text import texts_in_step


def test_create_list_info_and_sentences(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    with DocumentIndex(tmp_path / "documents.db") as index:
        assert index.names() == [] and index.collection("x") is None
        index.create("work", [docs])
        index.create("Alpha", [docs / ".." / "docs"])
        assert index.names() == ["Alpha", "work"]
        info = index.collection("work")
        assert isinstance(info, CollectionInfo)
        assert info.roots == (str(docs),) and info.embedding_model is None and info.created
        with pytest.raises(ValueError, match="a collection named work already exists"):
            index.create("work", [docs])
        with pytest.raises(ValueError, match="does not exist"):
            index.create("other", [tmp_path / "missing"])
        with pytest.raises(ValueError, match="needs a name"):
            index.create("  ", [docs])
        with pytest.raises(UnknownCollection) as info_exc:
            index.status("nope")
        assert str(info_exc.value) == "no collection named nope; `cove docs list` shows them"
        (tmp_path / "one.txt").write_text("one file")
        index.add_roots("work", [tmp_path / "one.txt"])
        assert set(index.collection("work").roots) == {str(docs), str(tmp_path / "one.txt")}  # type: ignore[union-attr]
        status = index.status("work")
        assert (status.files_indexed, status.chunks, status.pending, status.last_indexed) == (0, 0, 0, None)


def test_reopening_keeps_everything_and_a_damaged_file_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "documents.db"
    with DocumentIndex(path) as index:
        index.create("work", [tmp_path])
    with DocumentIndex(path) as index:
        assert index.names() == ["work"] and index.notice is None
    path.write_bytes(b"this is not a database at all" * 100)
    with DocumentIndex(path) as index:
        assert index.names() == []
        assert index.notice is not None and "damaged" in index.notice
    assert [p.name for p in tmp_path.glob("documents.db.corrupt-*")]


def test_remove_deletes_chunks_vectors_and_text_and_vacuums(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    secret = "ultramarinesecretword"
    (docs / "n0.txt").write_text("Note zero mentions ultramarine and much else. " * 200)
    for i in range(1, 30):
        (docs / f"n{i}.txt").write_text(f"Note {i} mentions {secret} and much else. " * 200)
    path = tmp_path / "documents.db"
    with DocumentIndex(path) as index:
        index.create("keep", [docs / "n0.txt"])
        index.create("gone", [docs])
    index_collection(path, "keep")
    index_collection(path, "gone")
    before = path.stat().st_size
    with DocumentIndex(path) as index:
        assert index.status("gone").chunks > 30
        index.remove("gone")
        assert index.names() == ["keep"]
        q = index.conn.execute
        assert q("SELECT count(*) FROM files").fetchone()[0] == 1
        n = q("SELECT count(*) FROM chunks").fetchone()[0]
        assert n == index.status("keep").chunks
        table = index.text_table("keep")
        assert q(f"SELECT count(*) FROM {table} WHERE {table} MATCH 'ultramarine'").fetchone()[0] == n
        assert q(f"SELECT count(*) FROM {table} WHERE {table} MATCH 'ultramarinesecretword'").fetchone()[0] == 0
        texts_in_step(index)
        assert not q("SELECT name FROM sqlite_master WHERE name LIKE 'text_c%' AND name NOT LIKE ?", (table + "%",)).fetchall()
        with pytest.raises(UnknownCollection):
            index.remove("gone")
    assert path.stat().st_size < before / 3  # VACUUMed: the removed text is not left in free pages
    for leftover in (path, path.with_name(path.name + "-wal")):
        assert not leftover.exists() or secret.encode() not in leftover.read_bytes()
