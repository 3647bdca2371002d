"""The default embedder: a sentence-transformers BERT zip from a pinned wheel, converted to a GGUF
without torch (models/bert_gguf.py), registered once, found as the documents' embedding model and
kept out of the chat models; a zip that is not a model gets a sentence and leaves nothing behind.
With the real pinned wheel (a `real_model` test), the converted all-MiniLM-L6-v2 ranks a paraphrase
above an unrelated sentence."""

from __future__ import annotations

import dataclasses
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import sqlite_utils

from app.docs.embedding import chat_models, embedding_model, embeds
from app.engine.client import EngineClient
from models.bert_gguf import ConversionError, convert_zip
from models.default_embedder import MINILM_ZIP, default_embedder, install_default_embedder
from models.library import ModelLibrary, create_models_table
from models.wheel_models import WheelModel, WheelModelError
from tests.support.fake_wheels import fake_index, publish_model
from tests.support.tiny_bert import tiny_bert_zip, write_tiny_bert
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_index(monkeypatch, tmp_path)


def _library(tmp_path: Path) -> ModelLibrary:
    db = sqlite_utils.Database(tmp_path / "cove.db")
    create_models_table(db)
    return ModelLibrary(db, tmp_path / "models")


def _published(index: Path, data: bytes) -> WheelModel:
    spec = publish_model(index, data, prefix="cove-fake-embedder", parts=1, name="tiny-embedder", title="Tiny-Embedder")
    return dataclasses.replace(spec, filename="tiny-embedder.model.zip")


def _vectors(path: Path, texts: list[str]) -> np.ndarray:
    with EngineClient() as engine:
        engine.load(str(path), n_ctx=64)
        return np.asarray(engine.embed(texts).vectors)


def test_a_converted_bert_zip_embeds_like_an_embedding_model(tmp_path: Path) -> None:
    archive = tmp_path / "model.zip"
    archive.write_bytes(tiny_bert_zip())
    out = tmp_path / "tiny.gguf"
    convert_zip(archive, out, "tiny")
    v = _vectors(out, ["the harbour keeper", "a violin", "the harbour keeper"])
    assert v.shape == (3, 32) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert np.allclose(v[0], v[2]) and not np.allclose(v[0], v[1])
    again = tmp_path / "again.gguf"
    convert_zip(archive, again, "tiny")
    assert again.read_bytes() == out.read_bytes()  # the same zip converts to the same bytes


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"not a zip at all", "could not be read as a model"),
        (lambda: _without("tokenizer.json"), "has no tokenizer.json"),
        (lambda: _without("model.safetensors"), "has no model.safetensors"),
    ],
)
def test_a_zip_that_is_not_a_bert_model_gets_a_sentence_and_leaves_nothing(tmp_path: Path, data, words: str) -> None:
    archive = tmp_path / "model.zip"
    archive.write_bytes(data() if callable(data) else data)
    out = tmp_path / "out" / "tiny.gguf"
    out.parent.mkdir()
    with pytest.raises(ConversionError, match=words):
        convert_zip(archive, out, "tiny")
    assert list(out.parent.iterdir()) == []


def _without(member: str) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(tiny_bert_zip()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name in source.namelist():
            if name != member:
                z.writestr(name, source.read(name))
    return out.getvalue()


def test_the_embedder_is_fetched_converted_and_registered_once(index: Path, tmp_path: Path) -> None:
    spec = _published(index, tiny_bert_zip())
    library = _library(tmp_path)
    chat = library.import_file(write_tiny_gguf(tmp_path / "chat.gguf"), name="chat")
    lines: list[str] = []
    model = install_default_embedder(library, tmp_path / "models", progress=lines.append, spec=spec)
    assert model.name == spec.name and model.source == "download" and embeds(model)
    assert any(line.startswith("converting Tiny-Embedder") for line in lines)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny-embedder-f16.gguf"]  # no zip, no wheel
    assert default_embedder(library, spec) == model
    assert embedding_model(library) == model  # documents are embedded with it
    assert chat_models(library.list()) == [chat]  # and it is never offered for chat
    for wheel in index.iterdir():
        wheel.unlink()
    assert install_default_embedder(library, tmp_path / "models", spec=spec) == model  # installed: the index is not asked


def test_a_wheel_whose_zip_is_not_a_model_leaves_nothing(index: Path, tmp_path: Path) -> None:
    spec = _published(index, _without("config.json"))
    library = _library(tmp_path)
    with pytest.raises(WheelModelError, match="has no config.json"):
        install_default_embedder(library, tmp_path / "models", spec=spec)
    assert list((tmp_path / "models").iterdir()) == [] and library.list() == []


def test_a_bert_gguf_is_an_embedding_model_and_a_llama_is_not(tmp_path: Path) -> None:
    library = _library(tmp_path)
    bert = library.import_file(write_tiny_bert(tmp_path / "bert.gguf"), name="bert")
    llama = library.import_file(write_tiny_gguf(tmp_path / "llama.gguf"), name="llama")
    assert embeds(bert) and not embeds(llama)
    assert chat_models([bert, llama]) == [llama]


@pytest.mark.real_model
def test_the_real_default_embedder_ranks_a_paraphrase_above_an_unrelated_sentence(minilm_gguf: Path) -> None:
    v = _vectors(
        minilm_gguf,
        [
            "How do I count how often each word appears in a text?",
            "collections.Counter is a dict subclass for counting hashable objects.",
            "The tarfile module reads and writes tar archives.",
        ],
    )
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.1
    assert MINILM_ZIP.licence == "Apache-2.0"
