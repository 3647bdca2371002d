"""The embedding model new document collections use (Settings.embedding_model): nothing chosen by
default, a name survives a save and a read, and a value that is not a name reads as nothing chosen
(app/docs/embedding.py then takes the default embedder, else the first by name)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from app.settings import Settings, load_settings, save_settings


def test_nothing_is_chosen_by_default(tmp_path: Path) -> None:
    assert Settings().embedding_model is None
    assert load_settings(tmp_path / "settings.json").embedding_model is None  # no file


def test_the_choice_round_trips_with_the_other_settings(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    save_settings(path, replace(Settings(), embedding_model="bge-small-en-v1.5", offline=True, last_model="qwen"))
    assert json.loads(path.read_text(encoding="utf-8"))["embedding_model"] == "bge-small-en-v1.5"
    read = load_settings(path)
    assert (read.embedding_model, read.offline, read.last_model) == ("bge-small-en-v1.5", True, "qwen")
    save_settings(path, replace(read, embedding_model=None))
    assert load_settings(path).embedding_model is None


def test_a_value_that_is_not_a_name_reads_as_nothing_chosen(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    for value in (17, "", "   ", None, ["bge"], {"name": "bge"}, True):
        path.write_text(json.dumps({"embedding_model": value, "offline": True}), encoding="utf-8")
        read = load_settings(path)
        assert read.embedding_model is None and read.offline is True, value  # the rest of the file still counts
    path.write_text(json.dumps({"embedding_model": "  bge-small \n"}), encoding="utf-8")
    assert load_settings(path).embedding_model == "bge-small"
