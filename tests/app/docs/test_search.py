"""Keyword search (BM25 over FTS5): the person's words are quoted, never FTS syntax; punctuation
alone finds nothing; several collections at once; passages carry file, heading, offsets, ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.docs.index_db import DocumentIndex, UnknownCollection
from app.docs.indexer import index_collection
from app.docs.search import fts_query, fuse, search


@pytest.fixture
def index(tmp_path: Path) -> DocumentIndex:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "guide.md").write_text(
        "# Guide\n\nIntro words.\n\n## Install\n\nRun the installer, then restart the computer.\n\n"
        "## Usage\n\nOpen the app and drag folders onto it.\n"
    )
    (a / "other.txt").write_text("Nothing relevant here, except one mention of installing.\n")
    (b / "recipes.txt").write_text("Bake the bread at 220 degrees for forty minutes.\n")
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as idx:
        idx.create("manuals", [a])
        idx.create("kitchen", [b])
    index_collection(db, "manuals")
    index_collection(db, "kitchen")
    idx = DocumentIndex(db)
    yield idx  # type: ignore[misc]
    idx.close()


def test_best_passage_with_where_offsets_and_ranks(index: DocumentIndex, tmp_path: Path) -> None:
    found = search(index, ["manuals"], "How do I run the install?")
    top = found[0]
    assert top.path == str(tmp_path / "a" / "guide.md") and top.heading == "Guide > Install" and top.where == "Guide > Install"
    assert "installer" in top.text and top.rank_bm25 == 1 and top.rank_vector is None and top.collection == "manuals"
    text = (tmp_path / "a" / "guide.md").read_text()
    assert text[top.start : top.end] == top.text  # offsets point into the file's text
    assert [p.rank_bm25 for p in found] == sorted(p.rank_bm25 for p in found if p.rank_bm25)
    assert found == sorted(found, key=lambda p: -p.score)


def test_fts_syntax_in_the_query_is_only_words(index: DocumentIndex) -> None:
    for q in ['install" OR "bread', "install*", "NEAR(install bread)", "install AND", "-install", "text:install", "install^"]:
        paths = {Path(p.path).name for p in search(index, ["manuals", "kitchen"], q)}
        assert "guide.md" in paths or "recipes.txt" in paths  # no error, words found
    assert fts_query('say "hi" (now)') == '"say" OR "hi" OR "now"'
    assert fts_query("How many gulls did the keeper count?") == '"many" OR "gulls" OR "keeper" OR "count"'
    assert fts_query("What is it?") == '"what" OR "is" OR "it"'  # nothing but common words: kept
    for q in ["", "   ", "?!", "*", '"', "()", "---", "^:"]:
        assert search(index, ["manuals"], q) == []
        assert fts_query(q) is None


def test_collections_are_kept_apart_and_unknown_names_are_a_sentence(index: DocumentIndex) -> None:
    assert search(index, ["manuals"], "bread") == []
    assert [Path(p.path).name for p in search(index, ["kitchen"], "bread")] == ["recipes.txt"]
    both = search(index, ["manuals", "kitchen"], "bread installer")
    assert {p.collection for p in both} == {"manuals", "kitchen"}
    assert len(search(index, ["manuals", "kitchen"], "the", limit=2)) == 2
    with pytest.raises(UnknownCollection, match="no collection named nope"):
        search(index, ["manuals", "nope"], "bread")


def test_reciprocal_rank_fusion() -> None:
    fused = fuse([1, 2, 3], [3, 4])
    assert [cid for cid, _ in fused] == [3, 1, 2, 4]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fuse([], []) == []
