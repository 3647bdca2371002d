"""Hybrid search with the tiny model's embeddings (random but deterministic vectors, so these test
the mechanics): vectors stored with the model's name and size, a query ranks its own chunk first,
RRF merges both lists, a collection without vectors still searches by keywords, switching models
re-embeds rather than mixing, a rename re-embeds nothing, and an embedding failure leaves the file
indexed for keywords with a sentence."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import sqlite_utils

from app.docs.embedding import EngineEmbedder, embedding_model
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from models.library import InstalledModel, ModelLibrary, create_models_table
from tests.support.tiny_model import N_EMBD, write_tiny_gguf

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelLibrary]:
    folder = tmp_path_factory.mktemp("models")
    db = sqlite_utils.Database(folder / "cove.db")
    create_models_table(db)
    library = ModelLibrary(db, folder / "store")
    library.import_file(write_tiny_gguf(folder / "embed-a.gguf", pooling_type=1, seed=1), name="embed-a")
    library.import_file(write_tiny_gguf(folder / "embed-b.gguf", pooling_type=3, seed=2), name="embed-b")
    library.import_file(write_tiny_gguf(folder / "chat.gguf"), name="chat")
    yield library
    db.close()


@pytest.fixture(scope="module")
def embed_a(models: ModelLibrary) -> Iterator[EngineEmbedder]:
    embedder = EngineEmbedder(models.get("embed-a"), n_threads=1)
    yield embedder
    embedder.close()


class Counting:
    """An Embedder that passes texts to a real one and counts them."""

    def __init__(self, inner: EngineEmbedder) -> None:
        self.inner, self.texts = inner, 0

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed(texts)


def corpus(folder: Path) -> None:
    folder.mkdir()
    topics = ["lighthouse keepers", "orbital mechanics", "sourdough baking", "tax returns", "violin making"]
    for i, topic in enumerate(topics):
        paras = [f"Paragraph {j} of a note on {topic}: " + " ".join(f"{topic.split()[0]}{k}" for k in range(40)) for j in range(6)]
        (folder / f"n{i}.md").write_text(f"# {topic.title()}\n\n" + "\n\n".join(paras) + "\n")
    (folder / "long.txt").write_text("q." * 1500 + "\n")  # chunks of ~1000 tokens, more than the model takes: cut for embedding


def vector_rows(db: Path) -> list[tuple[str, int, int]]:
    with DocumentIndex(db) as index:
        return [(str(m), int(d), int(n)) for m, d, n in index.conn.execute("SELECT model, dim, count(*) FROM vectors GROUP BY model, dim")]


def chunk_count(db: Path) -> int:
    with DocumentIndex(db) as index:
        return int(index.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


def test_embedding_model_is_the_installed_model_with_pooling(models: ModelLibrary) -> None:
    found = embedding_model(models, None)
    assert found is not None and found.name in ("embed-a", "embed-b")

    class Wants:
        embedding_model = "embed-b"

    assert embedding_model(models, Wants()).name == "embed-b"  # type: ignore[union-attr]


def test_hybrid_index_and_search(tmp_path: Path, embed_a: EngineEmbedder, models: ModelLibrary) -> None:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    corpus(docs)
    with DocumentIndex(db) as index:
        index.create("notes", [docs])
    counting = Counting(embed_a)
    done = index_collection(db, "notes", embedder=counting)
    assert done.finished and done.problems == ()
    n = chunk_count(db)
    assert vector_rows(db) == [("embed-a", N_EMBD, n)]
    assert counting.texts <= n  # chunks with the same text are embedded once
    assert embed_a.max_chars < 1000  # the long chunks were cut to fit (their text in the index stays whole)
    with DocumentIndex(db) as index:
        status = index.status("notes")
        assert status.embedding_model == "embed-a" and status.vectors == n
        row = index.conn.execute("SELECT id, text FROM chunks WHERE text LIKE '%orbital2%' LIMIT 1").fetchone()
        target, text = int(row[0]), str(row[1])
        found = search(index, ["notes"], text, limit=5, embedder=embed_a)
        assert found[0].chunk_id == target and found[0].rank_vector == 1 and found[0].rank_bm25 is not None
        # Score fusion: meaning's best (and BM25's best too here) scores 1; every other below it.
        assert found[0].score == pytest.approx(1.0) if found[0].rank_bm25 == 1 else found[0].score >= 0.7
        assert all(0.0 <= p.score <= found[0].score for p in found)
        # A query with no keyword match still finds passages by meaning.
        by_meaning = search(index, ["notes"], "zzqqy", embedder=embed_a)
        assert by_meaning and all(p.rank_bm25 is None and p.rank_vector for p in by_meaning)
        # Without an embedder: keywords only.
        plain = search(index, ["notes"], "sourdough", embedder=None)
        assert plain and all(p.rank_vector is None for p in plain)

    # A rename re-embeds nothing: vectors are found by the chunks' hashes.
    (docs / "n1.md").rename(docs / "renamed.md")
    before = counting.texts
    index_collection(db, "notes", embedder=counting)
    assert counting.texts == before and vector_rows(db) == [("embed-a", N_EMBD, chunk_count(db))]

    # Another model: re-embedded, never mixed.
    embed_b = EngineEmbedder(models.get("embed-b"), n_threads=1)
    try:
        index_collection(db, "notes", embedder=embed_b)
        assert vector_rows(db) == [("embed-b", N_EMBD, chunk_count(db))]
        with DocumentIndex(db) as index:
            assert index.status("notes").embedding_model == "embed-b"
            # The old model's embedder no longer searches by meaning here; keywords still work.
            assert all(p.rank_vector is None for p in search(index, ["notes"], "violin", embedder=embed_a))
            assert any(p.rank_vector for p in search(index, ["notes"], "violin", embedder=embed_b))
    finally:
        embed_b.close()


def test_a_collection_without_vectors_searches_by_keywords(tmp_path: Path, embed_a: EngineEmbedder) -> None:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    corpus(docs)
    with DocumentIndex(db) as index:
        index.create("notes", [docs])
    index_collection(db, "notes")
    assert vector_rows(db) == []
    with DocumentIndex(db) as index:
        found = search(index, ["notes"], "lighthouse", embedder=embed_a)
        assert found and all(p.rank_vector is None and p.rank_bm25 for p in found)
    # Indexing again with the embedder fills the vectors in without reading the files again.
    index_collection(db, "notes", embedder=embed_a)
    assert vector_rows(db) == [("embed-a", N_EMBD, chunk_count(db))]


def test_an_embedding_failure_keeps_the_file_for_keywords(tmp_path: Path, models: ModelLibrary) -> None:
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    corpus(docs)
    with DocumentIndex(db) as index:
        index.create("notes", [docs])
    chat: InstalledModel = models.get("chat")  # declares no pooling type: the engine refuses to embed
    broken = EngineEmbedder(chat, n_threads=1)
    try:
        done = index_collection(db, "notes", embedder=broken)
    finally:
        broken.close()
    assert done.finished and done.files_done == 6
    assert done.problems and all("keyword search only" in p.sentence and "not an embedding model" in p.sentence for p in done.problems)
    with DocumentIndex(db) as index:
        assert index.status("notes").files_indexed == 6 and index.status("notes").vectors == 0
        assert search(index, ["notes"], "sourdough")
