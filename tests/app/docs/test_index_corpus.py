"""The whole corpus of real documents indexed (PDF, DOCX, HTML, Markdown, text in three encodings,
source code and every bad case): each known sentence found at its file, page and heading; each bad
case listed with its sentence while the rest is indexed; and the files never changed, not even by
removing the collection."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from tests.support.docs_corpus import write_corpus

pytestmark = pytest.mark.timeout(120)


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out: dict[str, tuple[int, int, str]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        st = p.stat()
        try:
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size < 50 * 1024**2 else "(large)"
        except PermissionError:
            digest = "(unreadable)"
        out[str(p)] = (st.st_size, st.st_mtime_ns, digest)
    return out


def test_the_corpus_indexes_finds_its_facts_and_lists_its_problems(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    before = snapshot(corpus.root)
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as index:
        index.create("corpus", [corpus.root])
    done = index_collection(db, "corpus")
    assert done.finished
    problems = {Path(p.path).relative_to(corpus.root).as_posix(): p.sentence for p in done.problems}
    for rel, fragment in corpus.bad.items():
        assert fragment in problems.get(rel, ""), (rel, problems.get(rel))
    with DocumentIndex(db) as index:
        status = index.status("corpus")
        assert status.files_indexed >= len(corpus.good)
        assert {Path(p.path).relative_to(corpus.root).as_posix() for p in status.problems} >= set(corpus.bad)
        for fact in corpus.facts:
            found = search(index, ["corpus"], fact.text, limit=3)
            assert found, fact
            top = found[0]
            assert Path(top.path).relative_to(corpus.root).as_posix() == fact.path, (fact, top)
            if fact.page is not None:
                assert top.page == fact.page, (fact, top)
            if fact.heading is not None:
                assert top.heading == fact.heading, (fact, top)
        index.remove("corpus")
    assert snapshot(corpus.root) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "documents.db"]
