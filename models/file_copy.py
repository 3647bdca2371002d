"""A model file's handling on disk, shared by the library (models/library.py) and its projectors
(models/projector_files.py): paths made absolute, a stat that says what is wrong in a sentence, a
check that a file did not change while it was read, a free name in a folder, and a copy hashed as
it is written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from models.gguf_errors import InvalidModelFile

_COPY_CHUNK = 4 << 20


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of the file's bytes (models/gguf_info.py's, imported when a file is hashed: the
    `gguf` package it sits beside imports numpy)."""
    from models.gguf_info import sha256_file as file_sha256

    return file_sha256(path, chunk_size)


def _abspath(path: str | Path) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise InvalidModelFile(f"no such file: {path}") from None
    except OSError as exc:
        raise InvalidModelFile(f"cannot read the file {path}: {exc.strerror or exc}") from None


def _check_still(path: Path, before: os.stat_result) -> None:
    after = _stat(path)
    if (after.st_size, after.st_mtime, after.st_ctime_ns, after.st_ino) != (
        before.st_size,
        before.st_mtime,
        before.st_ctime_ns,
        before.st_ino,
    ):
        raise InvalidModelFile(f"the file changed while it was being checked; try again when it is complete ({path})")


def _free_path(folder: Path, filename: str) -> Path:
    stem, suffix = (filename[:-5], filename[-5:]) if filename.lower().endswith(".gguf") else (filename, "")
    candidate, i = folder / filename, 1
    while candidate.exists():
        i += 1
        candidate = folder / f"{stem}-{i}{suffix}"
    return candidate


def _copy_with_sha256(src: Path, dest: Path) -> str:
    digest = hashlib.sha256()
    with src.open("rb") as fin, dest.open("wb") as fout:
        while chunk := fin.read(_COPY_CHUNK):
            digest.update(chunk)
            fout.write(chunk)
        fout.flush()
        os.fsync(fout.fileno())  # the bytes are on disk before the rename and the database row
    return digest.hexdigest()
