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


def test_score_fusion_scales_each_list_and_weighs_meaning_more() -> None:
    bm25 = [(1, 12.0), (2, 9.0), (3, 4.0)]  # scaled: 1.0, 0.625, 0.0
    vector = [(3, 0.80), (4, 0.60), (5, 0.40)]  # scaled: 1.0, 0.5, 0.0
    fused = dict(fuse(bm25, vector, weight=0.7))
    assert fused[3] == pytest.approx(0.7)  # the meaning's best, BM25's last
    assert fused[1] == pytest.approx(0.3)  # BM25's best, not found by meaning
    assert fused[4] == pytest.approx(0.35) and fused[2] == pytest.approx(0.1875) and fused[5] == pytest.approx(0.0)
    assert [cid for cid, _ in fuse(bm25, vector, weight=0.7)] == [3, 4, 1, 2, 5]
    # One list alone keeps its order; equal scores all count as the best.
    assert [cid for cid, _ in fuse(bm25, [])] == [1, 2, 3]
    assert [cid for cid, _ in fuse([], vector)] == [3, 4, 5]
    assert fuse([(7, 2.0), (8, 2.0)], []) == [(7, pytest.approx(0.3)), (8, pytest.approx(0.3))]
    assert fuse([], []) == []
