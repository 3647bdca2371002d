"""A BERT-like embedding model (no KV cache, WordPiece, mean pooling: the shape of MiniLM, bge,
e5, nomic) loads in the engine, embeds, refuses to write a reply with a sentence, and indexes and
searches a collection of real documents."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import sqlite_utils

from app.docs.embedding import EngineEmbedder, embedding_model
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from app.engine.client import EngineClient
from app.engine.request import ReplyRequest, Sampling
from models.library import ModelLibrary, create_models_table
from tests.support.docs_corpus import LIGHTHOUSE, write_corpus
from tests.support.tiny_bert import write_tiny_bert

pytestmark = pytest.mark.timeout(240)


def test_a_bert_embedding_model_loads_embeds_and_refuses_to_write(tmp_path: Path) -> None:
    path = write_tiny_bert(tmp_path / "tiny-bert.gguf")
    with EngineClient() as engine:
        loaded = engine.load(str(path), n_ctx=256)
        assert loaded.embeddings
        out = engine.embed(["the lighthouse keeper", "the kettle warranty", "the lighthouse keeper"])
        v = np.asarray(out.vectors)
        assert v.shape == (3, 32) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
        assert np.allclose(v[0], v[2]) and not np.allclose(v[0], v[1])
        done = list(engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4))))
        assert done[-1].status == "error" and "is an embedding model" in (done[-1].error or "")
        again = engine.embed(["the tide"])  # the refusal left the engine as it was
        assert len(again.vectors[0]) == 32


def test_a_collection_is_indexed_and_searched_with_a_bert_model(tmp_path: Path) -> None:
    db = sqlite_utils.Database(tmp_path / "cove.db")
    create_models_table(db)
    library = ModelLibrary(db, tmp_path / "store")
    library.import_file(write_tiny_bert(tmp_path / "tiny-bert.gguf"), name="tiny-bert")
    model = embedding_model(library)
    assert model is not None and model.name == "tiny-bert"
    corpus = write_corpus(tmp_path / "papers", bad=False)
    index_path = tmp_path / "documents.db"
    with DocumentIndex(index_path) as index:
        index.create("papers", [corpus.root])
    embedder = EngineEmbedder(model, n_threads=1)
    try:
        assert index_collection(index_path, "papers", embedder=embedder, lower_priority=False).finished
        with DocumentIndex(index_path) as index:
            status = index.status("papers")
            assert status.embedding_model == "tiny-bert" and status.vectors == status.chunks > 0
            found = search(index, ["papers"], "lighthouse keeper gulls", embedder=embedder)
    finally:
        embedder.close()
        db.close()
    assert LIGHTHOUSE in found[0].text and found[0].rank_bm25 == 1 and any(p.rank_vector for p in found)


def test_a_question_is_embedded_at_normal_priority_and_passages_below_it(tmp_path: Path) -> None:
    """Indexing's host is niced (a reply and the window come first); a search's host is not, so a
    person's question never waits behind the indexer's niced threads (app/docs/embedder_choice.py)."""
    from app.docs.embedder_choice import choose_embedder
    from app.docs.embedding import EMBED_NICE

    db = sqlite_utils.Database(tmp_path / "cove.db")
    create_models_table(db)
    library = ModelLibrary(db, tmp_path / "store")
    library.import_file(write_tiny_bert(tmp_path / "tiny-bert.gguf"), name="tiny-bert")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    indexing = choose_embedder(library, None, None)
    searching = choose_embedder(library, None, None, allow_new=False)
    assert searching.embedder is None  # a search never starts embedding a collection without vectors
    with DocumentIndex(tmp_path / "documents.db") as index:
        index.create("papers", [write_corpus(tmp_path / "papers", bad=False).root])
        index.conn.execute("UPDATE collections SET embedding_model = 'tiny-bert' WHERE name = 'papers'")
        info = index.collection("papers")
    searching = choose_embedder(library, None, info, allow_new=False)
    try:
        assert indexing.embedder is not None and searching.embedder is not None
        indexing.embedder.embed(["the tide"])
        searching.embedder.embed(["the tide"])
        index_pid, search_pid = indexing.embedder.host_pid, searching.embedder.host_pid
        assert index_pid is not None and search_pid is not None and index_pid != search_pid
        assert os.getpriority(os.PRIO_PROCESS, index_pid) == min(19, base + EMBED_NICE)
        assert os.getpriority(os.PRIO_PROCESS, search_pid) == base
    finally:
        indexing.close()
        searching.close()
