"""A vision model in the library: a text GGUF and its projector are one entry, imported in place or
by copy, paired and unpaired, refused with one sentence when the projector is not one, and its
projector file deleted with the model only when Cove placed it and nothing else uses it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import sqlite_utils

from models.gguf_errors import InvalidModelFile
from models.library import TABLE, ModelLibrary, add_projector_columns, create_models_table
from models.projector_files import check_projector_unchanged
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tiny_vision import write_tiny_mmproj, write_tiny_vision


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    database = sqlite_utils.Database(tmp_path / "cove.db")
    create_models_table(database)
    yield database
    database.close()


@pytest.fixture
def lib(db: sqlite_utils.Database, tmp_path: Path) -> ModelLibrary:
    return ModelLibrary(db, tmp_path / "models")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path / "downloads")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_in_place_records_the_projector(lib: ModelLibrary, pair: tuple[Path, Path]) -> None:
    text, mmproj = pair
    model = lib.import_file(text, mmproj=mmproj)
    assert model.vision
    assert (model.mmproj_path, model.mmproj_sha256, model.mmproj_size) == (str(mmproj), sha(mmproj), mmproj.stat().st_size)
    assert lib.get(model.name) == model  # read back from the table
    assert not lib.models_dir.exists()  # nothing copied
    check_projector_unchanged(model)


def test_import_by_copy_copies_both_and_removing_deletes_both(lib: ModelLibrary, pair: tuple[Path, Path]) -> None:
    text, mmproj = pair
    model = lib.import_file(text, copy=True, mmproj=mmproj)
    assert Path(model.path).parent == lib.models_dir and Path(model.mmproj_path or "").parent == lib.models_dir
    assert model.mmproj_sha256 == sha(mmproj) and Path(model.mmproj_path or "").read_bytes() == mmproj.read_bytes()
    assert sorted(p.name for p in lib.models_dir.iterdir()) == ["mmproj.gguf", "text_model.gguf"]
    lib.remove(model.name, delete_file=True)
    assert list(lib.models_dir.iterdir()) == []
    assert text.exists() and mmproj.exists()  # the person's own files stay


def test_a_shared_projector_goes_with_the_last_model_that_uses_it(lib: ModelLibrary, tmp_path: Path, pair: tuple[Path, Path]) -> None:
    first = lib.import_file(pair[0], copy=True, mmproj=pair[1])
    other = write_tiny_gguf(tmp_path / "downloads" / "other-Q8_0.gguf", seed=7)
    second = lib.import_file(other, copy=True, mmproj=pair[1])
    assert second.mmproj_path == first.mmproj_path  # the same bytes are copied once
    lib.remove(first.name, delete_file=True)
    assert Path(second.mmproj_path or "").exists()
    lib.remove(second.name, delete_file=True)
    assert not Path(second.mmproj_path or "").exists()


def test_a_projector_outside_the_models_folder_is_never_deleted(lib: ModelLibrary, pair: tuple[Path, Path]) -> None:
    model = lib.import_file(pair[0], copy=True)
    lib.set_projector(model.name, pair[1])  # paired in place
    lib.remove(model.name, delete_file=True)
    assert not Path(model.path).exists() and pair[1].exists()


def test_a_model_offered_as_projector_is_one_sentence_and_nothing_is_kept(
    lib: ModelLibrary, tmp_path: Path, pair: tuple[Path, Path]
) -> None:
    not_projector = write_tiny_gguf(tmp_path / "mmproj-x.gguf", seed=3)
    for copy in (False, True):
        with pytest.raises(InvalidModelFile) as err:
            lib.import_file(pair[0], copy=copy, mmproj=not_projector)
        assert str(err.value) == "mmproj-x.gguf is not a projector: it holds a llama model"
    assert lib.list() == []
    assert not lib.models_dir.exists() or list(lib.models_dir.iterdir()) == []


def test_a_failed_model_import_leaves_no_projector_copy(lib: ModelLibrary, tmp_path: Path, pair: tuple[Path, Path]) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 5)
    with pytest.raises(InvalidModelFile):
        lib.import_file(broken, copy=True, mmproj=pair[1])
    assert lib.list() == []
    assert not lib.models_dir.exists() or list(lib.models_dir.iterdir()) == []


def test_a_projector_is_not_a_model(lib: ModelLibrary, pair: tuple[Path, Path]) -> None:
    for copy in (False, True):
        with pytest.raises(InvalidModelFile, match="mmproj.gguf is a vision projector, not a model"):
            lib.import_file(pair[1], copy=copy)
    assert lib.list() == []


def test_pair_and_unpair_an_installed_model(lib: ModelLibrary, pair: tuple[Path, Path], tmp_path: Path) -> None:
    model = lib.import_file(pair[0])
    assert not model.vision and model.mmproj_path is None
    paired = lib.set_projector(model.name, pair[1])
    assert paired.vision and paired.mmproj_sha256 == sha(pair[1])
    again = lib.import_file(pair[0], mmproj=write_tiny_mmproj(tmp_path / "mmproj-2.gguf", seed=4))  # re-import, new projector
    assert again.name == model.name and again.mmproj_path == str(tmp_path / "mmproj-2.gguf")
    unpaired = lib.set_projector(model.name, None)
    assert not unpaired.vision and (unpaired.mmproj_sha256, unpaired.mmproj_size) == (None, None)
    assert pair[1].exists()


def test_a_gone_or_changed_projector_is_a_sentence(lib: ModelLibrary, pair: tuple[Path, Path]) -> None:
    model = lib.import_file(pair[0], mmproj=pair[1])
    with pair[1].open("ab") as f:
        f.write(b"\0" * 32)
    with pytest.raises(InvalidModelFile, match="changed since it was checked"):
        check_projector_unchanged(model)
    pair[1].unlink()
    with pytest.raises(InvalidModelFile, match="is gone"):
        check_projector_unchanged(model)


def test_an_older_table_gains_the_columns_and_its_rows_read_text_only(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    db = sqlite_utils.Database(tmp_path / "old.db")
    create_models_table(db)
    lib = ModelLibrary(db, tmp_path / "models")
    lib.import_file(pair[0])
    for column in ("mmproj_path", "mmproj_sha256", "mmproj_size"):  # as an older Cove left it
        db.execute(f"ALTER TABLE [{TABLE}] DROP COLUMN {column}")
    (old,) = lib.list()
    assert old.mmproj_path is None and not old.vision
    add_projector_columns(db)
    add_projector_columns(db)  # a second call is harmless
    assert {"mmproj_path", "mmproj_sha256", "mmproj_size"} <= set(db[TABLE].columns_dict)
    assert lib.set_projector(old.name, pair[1]).vision
    db.close()
