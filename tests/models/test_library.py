"""ModelLibrary: import in place or by copy, idempotent re-import, names, lookups, removal, use tracking,
and the changed-file check, on a real SQLite file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import sqlite_utils

import models.library as library_module
from models.gguf_validate import InvalidModelFile
from models.library import FileNotOwned, InstalledModel, ModelLibrary, ModelNotFound, create_models_table
from tests.support.gguf_files import truncate, write_tiny_gguf


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
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "elsewhere").mkdir()
    return write_tiny_gguf(tmp_path / "elsewhere" / "Tiny-Q8_0.gguf")


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = library_module.sha256_file

    def counting(path: str | Path, chunk_size: int = 1 << 20) -> str:
        calls.append(str(path))
        return real(path, chunk_size)

    monkeypatch.setattr(library_module, "sha256_file", counting)
    return calls


def real_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_table_schema(db: sqlite_utils.Database) -> None:
    create_models_table(db)  # a second call is harmless
    table = db["models"]
    assert table.pks == ["name"]
    assert list(table.columns_dict) == [
        "name",
        "path",
        "sha256",
        "size",
        "mtime",
        "quant",
        "architecture",
        "parameter_count",
        "context_length",
        "has_chat_template",
        "source",
        "repo",
        "file",
        "revision",
        "added_at",
        "last_used_at",
        "ctime_ns",
        "inode",
        "mmproj_path",
        "mmproj_sha256",
        "mmproj_size",
    ]
    assert any(ix.unique and ix.columns == ["path"] for ix in table.indexes)


def test_import_in_place(lib: ModelLibrary, tiny: Path, hash_calls: list[str]) -> None:
    model = lib.import_file(tiny)
    assert isinstance(model, InstalledModel)
    assert model.name == "Tiny-Q8_0" and model.path == str(tiny) and model.source == "imported"
    assert model.sha256 == real_sha(tiny) and hash_calls == [str(tiny)]
    assert model.size == tiny.stat().st_size and model.mtime == tiny.stat().st_mtime
    assert model.architecture == "llama" and model.quant == "Q8_0" and model.context_length == 256
    assert model.has_chat_template is True and model.parameter_count == 272
    assert model.added_at.endswith("Z") and model.last_used_at is None
    assert not lib.models_dir.exists(), "importing in place copies nothing"
    assert lib.list() == [model]


def test_reimport_same_path_is_idempotent_and_refreshes_when_changed(lib: ModelLibrary, tiny: Path, hash_calls: list[str]) -> None:
    first = lib.import_file(tiny)
    assert lib.import_file(str(tiny)) == first
    assert len(hash_calls) == 1, "an unchanged file is not hashed again"
    write_tiny_gguf(tiny, context_length=8192)
    os.utime(tiny, (first.mtime + 5, first.mtime + 5))
    refreshed = lib.import_file(tiny)
    assert refreshed.name == first.name and refreshed.added_at == first.added_at
    assert refreshed.context_length == 8192 and refreshed.sha256 == real_sha(tiny) != first.sha256
    assert len(lib.list()) == 1 and len(hash_calls) == 2


def test_import_copy(lib: ModelLibrary, tiny: Path, hash_calls: list[str]) -> None:
    model = lib.import_file(tiny, copy=True)
    copied = lib.models_dir / tiny.name
    assert model.path == str(copied) and model.source == "copied"
    assert copied.read_bytes() == tiny.read_bytes()
    assert model.sha256 == real_sha(copied)
    assert hash_calls == [], "the copy is hashed while it is written: the data is read once"
    assert sorted(p.name for p in lib.models_dir.iterdir()) == [tiny.name], "no .part left behind"
    again = lib.import_file(tiny, copy=True)
    assert again == model and sorted(p.name for p in lib.models_dir.iterdir()) == [tiny.name]


def test_copy_of_a_different_file_with_the_same_name_gets_its_own_file_and_name(lib: ModelLibrary, tiny: Path, tmp_path: Path) -> None:
    first = lib.import_file(tiny, copy=True)
    other = write_tiny_gguf(tmp_path / tiny.name, context_length=999)
    second = lib.import_file(other, copy=True)
    assert second.name == "Tiny-Q8_0-2" and Path(second.path).name == "Tiny-Q8_0-2.gguf"
    assert Path(first.path).read_bytes() == tiny.read_bytes()
    assert second.context_length == 999


def test_name_clash_gets_a_suffix(lib: ModelLibrary, tmp_path: Path) -> None:
    paths = []
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
        paths.append(write_tiny_gguf(tmp_path / folder / "model.gguf"))
    names = [lib.import_file(p).name for p in paths]
    assert names == ["model", "model-2", "model-3"]
    named = lib.import_file(write_tiny_gguf(tmp_path / "x.gguf"), name="MODEL")
    assert named.name == "MODEL-4", "names are unique regardless of case"
    assert [m.name for m in lib.list()] == ["model", "model-2", "model-3", "MODEL-4"]


@pytest.mark.parametrize("copy", [False, True])
def test_bad_file_is_never_registered_and_leaves_no_copy(lib: ModelLibrary, tiny: Path, copy: bool) -> None:
    truncate(tiny, tiny.stat().st_size - 10)
    with pytest.raises(InvalidModelFile, match="incomplete"):
        lib.import_file(tiny, copy=copy)
    assert lib.list() == []
    assert not lib.models_dir.exists() or list(lib.models_dir.iterdir()) == []


def test_failed_copy_removes_the_part_file(lib: ModelLibrary, tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_copy(src: Path, dest: Path) -> str:
        dest.write_bytes(src.read_bytes()[:50])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(library_module, "_copy_with_sha256", broken_copy)
    with pytest.raises(OSError):
        lib.import_file(tiny, copy=True)
    assert lib.list() == [] and list(lib.models_dir.iterdir()) == []


def test_missing_file(lib: ModelLibrary, tmp_path: Path) -> None:
    with pytest.raises(InvalidModelFile, match="no such file"):
        lib.import_file(tmp_path / "nope.gguf")


def test_unknown_source_is_refused(lib: ModelLibrary, tiny: Path) -> None:
    with pytest.raises(ValueError):
        lib.import_file(tiny, source="stolen")


def test_get_by_name_case_and_path(lib: ModelLibrary, tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = lib.import_file(tiny)
    assert lib.get("Tiny-Q8_0") == model
    assert lib.get("tiny-q8_0") == model
    assert lib.get(str(tiny)) == model
    monkeypatch.chdir(tiny.parent)
    assert lib.get(tiny.name) == model, "a relative path is resolved"
    link = tiny.parent / "link.gguf"
    link.symlink_to(tiny)
    assert lib.get(str(link)) == model, "a symlink to a registered file finds it"
    with pytest.raises(ModelNotFound) as info:
        lib.get("nothing")
    assert str(info.value) == "no model named 'nothing'; `cove models list` shows what is installed"


def test_remove_keeps_the_file_unless_asked(lib: ModelLibrary, tiny: Path) -> None:
    model = lib.import_file(tiny, copy=True)
    assert lib.remove(model.name) == model
    assert lib.list() == [] and Path(model.path).exists()
    model = lib.import_file(model.path)  # re-register the copy in place
    lib.remove(model.name, delete_file=True)
    assert lib.list() == [] and not Path(model.path).exists()
    assert tiny.exists(), "the original is never touched"
    with pytest.raises(ModelNotFound):
        lib.remove(model.name)


def test_remove_refuses_to_delete_a_file_it_does_not_own(lib: ModelLibrary, tiny: Path) -> None:
    model = lib.import_file(tiny)
    with pytest.raises(FileNotOwned, match="not Cove's to delete"):
        lib.remove(model.name, delete_file=True)
    assert lib.list() == [model] and tiny.exists(), "nothing changed"


def test_mark_used_and_last_used(lib: ModelLibrary, tmp_path: Path) -> None:
    a = lib.import_file(write_tiny_gguf(tmp_path / "a.gguf"))
    b = lib.import_file(write_tiny_gguf(tmp_path / "b.gguf"))
    assert lib.last_used() is None
    lib.mark_used(a.name)
    lib.mark_used(b.name)
    assert lib.last_used().name == "b"
    lib.mark_used("A")  # lookups are case-insensitive here too
    last = lib.last_used()
    assert last.name == "a" and last.last_used_at > lib.get("b").last_used_at
    with pytest.raises(ModelNotFound):
        lib.mark_used("zzz")


def test_check_unchanged(lib: ModelLibrary, tiny: Path) -> None:
    model = lib.import_file(tiny)
    lib.check_unchanged(model)
    with tiny.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(InvalidModelFile, match="changed since it was checked; import it again"):
        lib.check_unchanged(model)
    truncate(tiny, model.size)
    os.utime(tiny, (model.mtime + 1, model.mtime + 1))
    with pytest.raises(InvalidModelFile, match="changed since it was checked"):
        lib.check_unchanged(model)
    tiny.unlink()
    with pytest.raises(InvalidModelFile, match="gone"):
        lib.check_unchanged(model)


def test_precomputed_sha256_is_not_recomputed(lib: ModelLibrary, tiny: Path, hash_calls: list[str]) -> None:
    digest = real_sha(tiny)
    model = lib.import_file(tiny, sha256=digest, source="download", repo="org/repo", file=tiny.name, revision="abc")
    assert hash_calls == [] and model.sha256 == digest
    assert (model.source, model.repo, model.file, model.revision) == ("download", "org/repo", tiny.name, "abc")


def test_writes_join_an_open_transaction(db: sqlite_utils.Database, lib: ModelLibrary, tiny: Path) -> None:
    with pytest.raises(RuntimeError), db.atomic():
        lib.import_file(tiny)
        raise RuntimeError("the caller's transaction fails")
    assert lib.list() == [], "the import was rolled back with the caller's transaction"


def test_refresh_keeps_the_entry_and_records_new_origin(lib: ModelLibrary, tiny: Path) -> None:
    first = lib.import_file(tiny)
    write_tiny_gguf(tiny, name="Newer")
    os.utime(tiny, (first.mtime + 9, first.mtime + 9))
    refreshed = lib.import_file(tiny, source="download", repo="org/tiny", revision="r2")
    assert (refreshed.name, refreshed.added_at) == (first.name, first.added_at)
    assert (refreshed.source, refreshed.repo, refreshed.revision) == ("download", "org/tiny", "r2")


def test_an_edit_in_place_at_the_same_size_with_the_mtime_put_back_is_noticed(lib: ModelLibrary, tiny: Path) -> None:
    from models.library import recheck_file

    model = lib.import_file(tiny)
    assert recheck_file(model) is None  # nothing changed: a stat, no hashing
    before = tiny.stat()
    data = bytearray(tiny.read_bytes())
    data[-1] ^= 0xFF  # one byte of the weights, in place
    with tiny.open("r+b") as f:
        f.write(bytes(data))
    os.utime(tiny, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -r: size and mtime as they were
    assert (tiny.stat().st_size, tiny.stat().st_mtime) == (model.size, model.mtime)
    with pytest.raises(InvalidModelFile, match="changed since it was checked"):
        lib.check_unchanged(model)
    recheck = recheck_file(model)
    assert recheck is not None and recheck.content_changed and recheck.sha256 == real_sha(tiny)
    stored = lib.record_recheck(model.name, recheck)
    assert stored.sha256 == recheck.sha256 and recheck_file(stored) is None  # checked once, then a stat again


def test_a_file_replaced_by_another_of_the_same_size_and_mtime_is_noticed(lib: ModelLibrary, tiny: Path, tmp_path: Path) -> None:
    from models.library import recheck_file

    model = lib.import_file(tiny)
    other = tmp_path / "other.gguf"
    data = bytearray(tiny.read_bytes())
    data[-1] ^= 0xFF
    other.write_bytes(bytes(data))
    os.utime(other, ns=(tiny.stat().st_atime_ns, tiny.stat().st_mtime_ns))
    os.replace(other, tiny)  # a new inode under the same name
    recheck = recheck_file(model)
    assert recheck is not None and recheck.content_changed


def test_an_older_coves_entry_is_stamped_once_when_its_file_is_as_checked(db: sqlite_utils.Database, lib: ModelLibrary, tiny: Path) -> None:
    from models.library import add_stat_columns

    model = lib.import_file(tiny)
    db.execute("UPDATE models SET ctime_ns = NULL, inode = NULL")
    db.conn.commit()
    add_stat_columns(db)
    stamped = lib.get(model.name)
    assert (stamped.ctime_ns, stamped.inode) == (tiny.stat().st_ctime_ns, tiny.stat().st_ino)
