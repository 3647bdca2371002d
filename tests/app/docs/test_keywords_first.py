"""A collection is searchable by keywords before its passages are embedded: the indexer writes
every file first and embeds after, reporting the passages embedded of those to embed; while the
embedder is held (a reply streaming), a keyword search already finds the last file's passage."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.docs.embedding import EngineEmbedder
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.search import search
from app.docs.types import Progress
from models.library import InstalledModel
from tests.support.tiny_bert import write_tiny_bert

pytestmark = pytest.mark.timeout(240)


def _model(path: Path) -> InstalledModel:
    return InstalledModel(
        name="tiny-bert", path=str(path), sha256="", size=path.stat().st_size, mtime=0.0, quant=None, architecture="bert",
        parameter_count=None, context_length=256, has_chat_template=False, source="imported", repo=None, file=None,
        revision=None, added_at="", last_used_at=None,
    )  # fmt: skip


def test_every_file_is_searchable_by_keywords_before_any_passage_is_embedded(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(6):
        (folder / f"note{i}.txt").write_text(f"Note {i}. The harbour keeper wrote entry number {i} " * 40, encoding="utf-8")
    (folder / "zz-last.txt").write_text("The quince marmalade recipe is in the last file.", encoding="utf-8")
    index_path = tmp_path / "documents.db"
    with DocumentIndex(index_path) as index:
        index.create("notes", [folder])
    seen: list[Progress] = []
    held = threading.Event()
    found_while_held: list[str] = []

    def hold() -> bool:
        if seen and seen[-1].vectors_total and not held.is_set():
            held.set()
            with DocumentIndex(index_path) as index:  # another connection, as the window's search
                found_while_held.extend(p.path for p in search(index, ["notes"], "quince marmalade"))
        return False

    embedder = EngineEmbedder(_model(write_tiny_bert(tmp_path / "tiny-bert.gguf")), n_threads=1)
    try:
        last = index_collection(index_path, "notes", embedder=embedder, on_progress=seen.append, hold=hold, lower_priority=False)
    finally:
        embedder.close()
    assert last.finished
    first_vector = next(i for i, p in enumerate(seen) if p.vectors_done)
    assert all(p.files_done == p.files_total == 7 for p in seen[first_vector:])  # every file written before any vector
    assert all(p.vectors_total == last.vectors_total for p in seen[first_vector:])
    assert last.vectors_done == last.vectors_total > 7
    assert held.is_set() and found_while_held and found_while_held[0].endswith("zz-last.txt")
    with DocumentIndex(index_path) as index:
        status = index.status("notes")
        assert status.vectors == status.chunks == last.vectors_total
