"""The Documents page's choice of embedding model, with two real tiny BERT GGUFs installed: the row
"Meaning search: [models]" shows the one in use; choosing another keeps it in the settings and, once
the person says yes, embeds the collections on the old model again with it; saying no leaves them
where they are while new collections take the new one. While nothing is chosen the page offers the
other installed model, and Keep makes the offer go for good."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.docs.embedding import EngineEmbedder
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from tests.support.tiny_bert import write_tiny_bert
from tests.ui.documents.main_window import open_window
from ui.documents import dialogs

WAIT_MS = 60_000
pytestmark = pytest.mark.timeout(240)


class Asked:
    """The page's yes-or-no dialog: each (title, question) kept, answered with `answer`."""

    def __init__(self) -> None:
        self.answer = True
        self.questions: list[tuple[str, str]] = []

    def __call__(self, _parent, title: str, question: str) -> bool:
        self.questions.append((title, question))
        return self.answer


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Asked:
    made = Asked()
    monkeypatch.setattr(dialogs, "ask_yes_no", made)
    return made


@pytest.fixture
def notes(cove_core, tmp_path: Path) -> Path:
    """bert-a and bert-b installed; the collection notes indexed and embedded with bert-a."""
    a = cove_core.library.import_file(write_tiny_bert(tmp_path / "a.gguf", seed=1), name="bert-a")
    cove_core.library.import_file(write_tiny_bert(tmp_path / "b.gguf", seed=2), name="bert-b")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "harbour.md").write_text("# Harbour\n\nThe harbour keeper counted the gulls at the tide.\n")
    (folder / "kettle.md").write_text("# Kettle\n\nThe kettle warranty runs for seven years.\n")
    db = cove_core.paths.documents_database
    with DocumentIndex(db) as index:
        index.create("notes", [folder])
    embedder = EngineEmbedder(a, n_threads=1)
    try:
        assert index_collection(db, "notes", embedder=embedder, lower_priority=False).finished
    finally:
        embedder.close()
    return folder


def _embedded_with(core, name: str) -> tuple[str | None, int, int]:
    with DocumentIndex(core.paths.documents_database) as index:
        status = index.status(name)
    return status.embedding_model, status.vectors, status.chunks


def _all_embedded_with(core, name: str, model: str) -> bool:
    """Every passage of `name` has a vector of `model`."""
    found, vectors, chunks = _embedded_with(core, name)
    return found == model and vectors == chunks > 0


def _pick(combo, name: str) -> None:
    """What choosing `name` in the combo does (activated carries the row picked)."""
    row = combo.findText(name)
    assert row >= 0, name
    combo.setCurrentIndex(row)
    combo.activated.emit(row)


def test_choosing_a_model_keeps_it_and_after_yes_embeds_the_collection_again(
    qtbot, cove_core, fake_engine, notes: Path, asked: Asked
) -> None:
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        page = window.documents.open().page
        choosing = window.documents.choosing
        assert choosing is not None
        row = choosing.row
        assert row.isVisible() and row.label.text() == "Meaning search:"
        assert [row.combo.itemText(i) for i in range(row.combo.count())] == ["bert-a", "bert-b"]
        assert row.combo.currentText() == "bert-a"  # nothing chosen: the first by name
        _pick(row.combo, "bert-b")
        assert cove_core.settings.embedding_model == "bert-b"
        assert asked.questions == [
            ("Embed again?", "notes is embedded with another model. Embed it again with bert-b now? Keyword search works meanwhile.")
        ]
        qtbot.waitUntil(lambda: _all_embedded_with(cove_core, "notes", "bert-b"), timeout=WAIT_MS)
        assert "being embedded again with bert-b" in page.error.text()
        assert not choosing.banner.isVisible()  # chosen: nothing to offer
        with DocumentIndex(cove_core.paths.documents_database) as index:
            models = {m for (m,) in index.conn.execute("SELECT DISTINCT model FROM vectors")}
        assert models == {"bert-b"}  # the old vectors are gone
    finally:
        window.close()


def test_saying_no_keeps_the_collection_on_its_model_and_new_ones_take_the_choice(
    qtbot, cove_core, fake_engine, notes: Path, asked: Asked, tmp_path: Path
) -> None:
    asked.answer = False
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        page = window.documents.open().page
        choosing = window.documents.choosing
        assert choosing is not None
        _pick(choosing.row.combo, "bert-b")
        assert cove_core.settings.embedding_model == "bert-b" and len(asked.questions) == 1
        more = tmp_path / "more"
        more.mkdir()
        (more / "tide.md").write_text("# Tide\n\nThe tide table is read at the harbour line.\n")
        page.add_paths([more], None)
        qtbot.waitUntil(lambda: "more" in page.names() and _all_embedded_with(cove_core, "more", "bert-b"), timeout=WAIT_MS)
        (notes / "kettle.md").write_text("# Kettle\n\nThe kettle warranty now runs for nine years.\n")
        page.select("notes")
        done: list[str] = []
        window.documents.worker.job_finished.connect(lambda _kind, name, _final: done.append(name))
        page.reindex_selected()
        qtbot.waitUntil(lambda: "notes" in done, timeout=WAIT_MS)
        model, vectors, chunks = _embedded_with(cove_core, "notes")
        assert model == "bert-a" and vectors == chunks > 0  # still on the model its vectors came from
    finally:
        window.close()


def test_the_other_installed_model_is_offered_until_the_person_keeps_one(qtbot, cove_core, fake_engine, notes: Path, asked: Asked) -> None:
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        window.documents.open()
        choosing = window.documents.choosing
        assert choosing is not None
        banner = choosing.banner
        assert banner.isVisible() and banner.label.text() == "bert-b is installed: use it for meaning search?"
        assert banner.use_button.text() == "Use it" and banner.keep_button.text() == "Keep bert-a"
        banner.keep_button.click()
        assert cove_core.settings.embedding_model == "bert-a"
        assert not banner.isVisible() and asked.questions == []  # nothing to embed again: no question
        window.documents.open().close()
        window.documents.open()
        assert not banner.isVisible()
        assert _embedded_with(cove_core, "notes")[0] == "bert-a"
    finally:
        window.close()
    again = open_window(qtbot, cove_core, fake_engine)  # a new window: the offer stays gone
    try:
        again.documents.open()
        assert again.documents.choosing is not None and not again.documents.choosing.banner.isVisible()
        assert again.documents.choosing.row.isVisible()
    finally:
        again.close()


def test_use_it_chooses_the_offered_model(qtbot, cove_core, fake_engine, notes: Path, asked: Asked) -> None:
    asked.answer = False
    window = open_window(qtbot, cove_core, fake_engine)
    try:
        window.documents.open()
        choosing = window.documents.choosing
        assert choosing is not None
        choosing.banner.use_button.click()
        assert cove_core.settings.embedding_model == "bert-b"
        assert not choosing.banner.isVisible() and choosing.row.combo.currentText() == "bert-b"
        assert [q for _t, q in asked.questions] == [
            "notes is embedded with another model. Embed it again with bert-b now? Keyword search works meanwhile."
        ]
    finally:
        window.close()
