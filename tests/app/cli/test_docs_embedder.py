"""Which embedding model embeds a collection (app/docs/embedder_choice.py), with two real tiny BERT
GGUFs installed: new collections take the chosen model (the setting, else the default embedder,
else the first by name); a collection stays on the model its vectors came from until
`cove docs reindex NAME --embedder MODEL` moves it (searchable by keywords meanwhile); a removed
model means keywords until the next run embeds it with the chosen one; a name that is not an
installed embedding model gets one sentence naming those that are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from app.docs.embedder_choice import NotAnEmbeddingModel, collection_model, find_embedding_model
from app.docs.embedding import DEFAULT_EMBEDDER, QUERY_NICE, EngineEmbedder, embedding_model
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from app.settings import Settings
from models.default_embedder import MINILM_ZIP
from models.library import ModelLibrary, create_models_table
from tests.support.cli import assert_clean_error, cove
from tests.support.tiny_bert import write_tiny_bert

pytestmark = pytest.mark.timeout(300)

NOTES = {
    "harbour.md": "# Harbour\n\nThe harbour keeper counted the gulls on the lighthouse at the tide.\n",
    "kettle.md": "# Kettle\n\nThe kettle warranty runs for seven years from the day it was read.\n",
}


@pytest.fixture
def library(tmp_path: Path):
    db = sqlite_utils.Database(tmp_path / "cove.db")
    create_models_table(db)
    yield ModelLibrary(db, tmp_path / "store")
    db.close()


def _notes(folder: Path) -> Path:
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text)
    return folder


def test_the_model_new_collections_take_is_the_setting_else_the_default_else_the_first(
    tmp_path: Path, library: ModelLibrary, tiny_gguf: Path
) -> None:
    assert MINILM_ZIP.name == DEFAULT_EMBEDDER  # the name register_default_embedder installs it under
    assert embedding_model(library, Settings()) is None
    library.import_file(write_tiny_bert(tmp_path / "z.gguf", seed=1), name="zeta-bert")
    library.import_file(write_tiny_bert(tmp_path / "a.gguf", seed=2), name="aardvark-bert")
    chat = library.import_file(tiny_gguf, name="chatty")
    first = embedding_model(library, Settings())
    assert first is not None and first.name == "aardvark-bert"  # no choice, no default: the first by name
    library.import_file(write_tiny_bert(tmp_path / "m.gguf", seed=3), name=DEFAULT_EMBEDDER)
    for settings in (None, Settings(), Settings(embedding_model="not-installed"), Settings(embedding_model=chat.name)):
        found = embedding_model(library, settings)
        assert found is not None and found.name == DEFAULT_EMBEDDER, settings  # a chat model or a missing name is passed over
    chosen = embedding_model(library, Settings(embedding_model="zeta-bert"))
    assert chosen is not None and chosen.name == "zeta-bert"


def test_the_rule_keeps_a_collection_on_its_model_and_a_gone_model_means_keywords_until_the_next_run(
    tmp_path: Path, library: ModelLibrary
) -> None:
    a = library.import_file(write_tiny_bert(tmp_path / "a.gguf", seed=1), name="bert-a")
    b = library.import_file(write_tiny_bert(tmp_path / "b.gguf", seed=2), name="bert-b")
    with DocumentIndex(tmp_path / "documents.db") as index:
        index.create("notes", [_notes(tmp_path / "notes")])
        index.conn.execute("UPDATE collections SET embedding_model = 'bert-a' WHERE name = 'notes'")
        on_a = index.require("notes")
        index.create("fresh", [tmp_path / "notes"])
        fresh = index.require("fresh")
    both = [a, b]
    for indexing in (True, False):
        assert collection_model(on_a, both, b, indexing=indexing).model == a  # b chosen: notes stays on a
    assert collection_model(fresh, both, b, indexing=True).model == b  # no vectors: the chosen model
    assert collection_model(fresh, both, b, indexing=False).model is None  # a search never starts embedding
    assert collection_model(None, both, b, indexing=True).model == b  # a collection about to be made
    assert collection_model(on_a, both, b, indexing=True, move_to=b).model == b  # the person moves it
    gone = collection_model(on_a, [b], b, indexing=False)
    assert (
        gone.model is None
        and gone.note == "notes's passages were embedded with bert-a, which is no longer installed, so it is searched by keywords only"
    )
    again = collection_model(on_a, [b], b, indexing=True)
    assert again.model == b and again.note is not None and again.note.endswith("so it is embedded again with bert-b")


def test_moving_drops_the_old_vectors_and_keyword_search_works_while_it_is_embedded_again(tmp_path: Path, library: ModelLibrary) -> None:
    a = library.import_file(write_tiny_bert(tmp_path / "a.gguf", seed=1), name="bert-a")
    b = library.import_file(write_tiny_bert(tmp_path / "b.gguf", seed=2), name="bert-b")
    db = tmp_path / "documents.db"
    with DocumentIndex(db) as index:
        index.create("notes", [_notes(tmp_path / "notes")])
    embed_a, embed_b, ask_b = (
        EngineEmbedder(a, n_threads=1),
        EngineEmbedder(b, n_threads=1),
        EngineEmbedder(b, nice=QUERY_NICE, n_threads=1),
    )
    try:
        assert index_collection(db, "notes", embedder=embed_a, lower_priority=False).finished
        stopped = index_collection(db, "notes", embedder=embed_b, should_stop=lambda: True, lower_priority=False)
        assert stopped.paused  # stopped before a passage was embedded with bert-b
        with DocumentIndex(db) as index:
            status = index.status("notes")
            assert status.embedding_model == "bert-b" and status.vectors == 0 < status.chunks
            assert index.conn.execute("SELECT count(*) FROM vectors WHERE model = 'bert-a'").fetchone()[0] == 0
            found = search(index, ["notes"], "kettle warranty", embedder=ask_b)
        assert found and found[0].path.endswith("kettle.md") and found[0].rank_bm25 == 1 and found[0].rank_vector is None
        assert index_collection(db, "notes", embedder=embed_b, lower_priority=False).finished
        with DocumentIndex(db) as index:
            status = index.status("notes")
            found = search(index, ["notes"], "kettle warranty", embedder=ask_b)
        assert status.vectors == status.chunks and any(p.rank_vector for p in found)
    finally:
        for embedder in (embed_a, embed_b, ask_b):
            embedder.close()


def test_a_name_that_is_not_an_installed_embedding_model_gets_one_sentence(tmp_path: Path, library: ModelLibrary, tiny_gguf: Path) -> None:
    with pytest.raises(
        NotAnEmbeddingModel, match=r"^no embedding model named x is installed; no embedding model is installed \(`cove setup`"
    ):
        find_embedding_model(library, "x")
    library.import_file(write_tiny_bert(tmp_path / "a.gguf"), name="bert-a")
    library.import_file(tiny_gguf, name="chatty")
    with pytest.raises(
        NotAnEmbeddingModel, match="^chatty is a chat model, not an embedding model; the installed embedding model is bert-a$"
    ):
        find_embedding_model(library, "chatty")
    assert find_embedding_model(library, "BERT-A").name == "bert-a"  # as `cove models` finds names


def _settings(home: Path) -> Settings:
    from app.paths import resolve_paths
    from app.settings import load_settings

    return load_settings(resolve_paths({"COVE_HOME": str(home)}).settings_file)


def _home(tmp_path: Path, tiny_gguf: Path) -> Path:
    """A COVE_HOME with two tiny BERTs and a chat model installed."""
    from app.core import open_core
    from app.paths import resolve_paths

    home = tmp_path / "home"
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        core.library.import_file(write_tiny_bert(tmp_path / "a.gguf", seed=1), name="bert-a")
        core.library.import_file(write_tiny_bert(tmp_path / "b.gguf", seed=2), name="bert-b")
        core.library.import_file(tiny_gguf, name="chatty")
    finally:
        core.close()
    return home


def _status(home: Path, name: str) -> dict:
    done = cove(home, "docs", "status", name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cove_docs_embedder_chooses_for_new_collections_and_reindex_moves_one(tmp_path: Path, tiny_gguf: Path) -> None:
    home = _home(tmp_path, tiny_gguf)
    listed = json.loads(cove(home, "docs", "embedder", "--json").stdout)
    assert listed["new_collections"] == "bert-a" and listed["chosen"] is None
    assert [(m["name"], m["dimensions"], m["new_collections"]) for m in listed["models"]] == [("bert-a", 32, True), ("bert-b", 32, False)]

    assert cove(home, "docs", "add", "notes", str(_notes(tmp_path / "notes"))).returncode == 0
    assert _status(home, "notes")["embedding_model"] == "bert-a"

    chose = cove(home, "docs", "embedder", "bert-b")
    assert chose.returncode == 0, chose.stderr
    assert "New collections are now embedded with bert-b." in chose.stdout
    assert "  cove docs reindex notes --embedder bert-b    (now bert-a)" in chose.stdout.splitlines()
    assert _settings(home).embedding_model == "bert-b"
    assert cove(home, "docs", "reindex", "notes").returncode == 0
    assert _status(home, "notes")["embedding_model"] == "bert-a"  # chosen for new collections only
    assert cove(home, "docs", "add", "more", str(tmp_path / "notes")).returncode == 0
    assert _status(home, "more")["embedding_model"] == "bert-b"
    shown = cove(home, "docs", "embedder").stdout.splitlines()
    assert shown[0] == "Embedding models installed; new collections are embedded with bert-b (your choice):"
    assert shown[1].startswith("  bert-a  ") and shown[1].endswith(", 32 dimensions; used by notes")
    assert shown[2].startswith("* bert-b  ") and shown[2].endswith("; used by more")

    moved = cove(home, "docs", "reindex", "notes", "--embedder", "bert-b")
    assert moved.returncode == 0, moved.stderr
    assert "Moving notes from bert-a to bert-b: its passages are embedded again, and it is searched by keywords meanwhile." in moved.stderr
    assert "embedding notes: " in moved.stderr  # progress, as for add
    status = _status(home, "notes")
    assert status["embedding_model"] == "bert-b" and status["vectors"] == status["chunks"] > 0
    found = json.loads(cove(home, "docs", "search", "notes", "kettle warranty", "--json").stdout)
    # The tiny BERT's weights are random, so its order means nothing: the keywords' best is found, and vectors are used.
    kettle = [p for p in found if p["path"].endswith("kettle.md")]
    assert kettle and kettle[0]["rank_bm25"] == 1 and any(p["rank_vector"] for p in found)

    # bert-b removed: keywords only, said; the next run embeds the collections with bert-a again.
    assert cove(home, "models", "remove", "bert-b").returncode == 0
    searched = cove(home, "docs", "search", "notes", "kettle warranty")
    assert (
        searched.returncode == 0
        and "embedded with bert-b, which is no longer installed, so it is searched by keywords only" in searched.stderr
    )
    again = cove(home, "docs", "reindex", "notes")
    assert again.returncode == 0 and "so it is embedded again with bert-a" in again.stderr
    assert _status(home, "notes")["embedding_model"] == "bert-a"


def test_bad_model_names_get_one_sentence_naming_the_installed_embedding_models(tmp_path: Path, tiny_gguf: Path) -> None:
    home = _home(tmp_path, tiny_gguf)
    installed = "the installed embedding models are bert-a and bert-b"
    assert assert_clean_error(cove(home, "docs", "embedder", "nope")) == f"cove: no embedding model named nope is installed; {installed}"
    assert (
        assert_clean_error(cove(home, "docs", "embedder", "chatty")) == f"cove: chatty is a chat model, not an embedding model; {installed}"
    )
    assert cove(home, "docs", "add", "notes", str(_notes(tmp_path / "notes")), "--no-embed").returncode == 0
    line = assert_clean_error(cove(home, "docs", "reindex", "notes", "--embedder", "chatty"))
    assert line == f"cove: chatty is a chat model, not an embedding model; {installed}"
    assert "give one of them" in assert_clean_error(cove(home, "docs", "reindex", "notes", "--embedder", "bert-a", "--no-embed"))
    assert _status(home, "notes")["embedding_model"] is None  # nothing was changed
    assert _settings(home).embedding_model is None
