"""The projector file of a vision model in the library (models/library.py): checking, hashing and
placing it (copied into the models folder, or kept in place, as its model is), and which projector
file is Cove's to delete when its model goes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from models.file_copy import _abspath, _check_still, _copy_with_sha256, _free_path, _stat, sha256_file
from models.projector import read_projector_header


class ModelLibrary(Protocol):
    """What of models/library.ModelLibrary this module reads (it is not imported: the library imports this)."""

    db: Any
    models_dir: Path
    table: str

    def _owns(self, path: Path) -> bool: ...


class InstalledModel(Protocol):
    """What of models/library.InstalledModel this module reads."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def mmproj_path(self) -> str | None: ...
    @property
    def mmproj_sha256(self) -> str | None: ...
    @property
    def mmproj_size(self) -> int | None: ...


@dataclass(frozen=True)
class PreparedProjector:
    path: Path  # where it stays: the person's file, or Cove's copy
    sha256: str
    size: int
    created: bool  # a copy made by this import (removed again if the model's import fails)

    def columns(self) -> dict[str, Any]:
        return {"mmproj_path": str(self.path), "mmproj_sha256": self.sha256, "mmproj_size": self.size}


def prepare_projector(library: ModelLibrary, path: str | Path, *, copy: bool, sha256: str | None) -> PreparedProjector:
    """Check that `path` is a projector (InvalidModelFile, one sentence, if not), then hash it in
    place, or with copy=True copy it into the models folder while hashing (a copy of the same bytes
    already there for another model is used instead)."""
    src = _abspath(path)
    read_projector_header(src)
    if not copy:
        before = _stat(src)
        digest = sha256 or sha256_file(src)
        _check_still(src, before)
        return PreparedProjector(src, digest, before.st_size, created=False)
    library.models_dir.mkdir(parents=True, exist_ok=True)
    dest = _free_path(library.models_dir, src.name)
    part = dest.with_name(dest.name + ".part")
    try:
        digest = _copy_with_sha256(src, part)
        read_projector_header(part)  # the bytes kept are a projector too
        for row in library.db.execute(f"SELECT DISTINCT mmproj_path FROM [{library.table}] WHERE mmproj_sha256 = ?", [digest]).fetchall():
            kept = Path(row[0])
            if library._owns(kept) and _size(kept) == os.path.getsize(part):
                part.unlink()
                return PreparedProjector(kept, digest, _size(kept), created=False)
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return PreparedProjector(dest, digest, os.path.getsize(dest), created=True)


def discard_projector(library: ModelLibrary, projector: PreparedProjector) -> None:
    """Undo `prepare_projector`: delete the copy it made, if it made one and nothing uses it."""
    if projector.created and not _users(library, projector.path):
        projector.path.unlink(missing_ok=True)


def owned_projector(library: ModelLibrary, model: InstalledModel) -> Path | None:
    """The projector file to delete with `model` (whose row is already gone): one inside the models
    folder, or one downloaded beside a downloaded model, that no other model uses. None otherwise."""
    if not model.mmproj_path:
        return None
    path = Path(model.mmproj_path)
    placed = library._owns(path) or (model.source == "download" and path.parent == Path(model.path).parent)
    return path if placed and not _users(library, path) else None


def _users(library: ModelLibrary, path: Path) -> int:
    return int(library.db.execute(f"SELECT count(*) FROM [{library.table}] WHERE mmproj_path = ?", [str(path)]).fetchone()[0])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def check_projector_unchanged(model: InstalledModel) -> None:
    """InvalidModelFile (one sentence) when the model's projector is gone or not the size it was
    when checked. A model without a projector passes."""
    from models.gguf_errors import InvalidModelFile

    if not model.mmproj_path:
        return
    size = _size(Path(model.mmproj_path))
    if size < 0:
        raise InvalidModelFile(f"the projector file {model.mmproj_path} of '{model.name}' is gone; pair it again or import the model again")
    if model.mmproj_size is not None and size != model.mmproj_size:
        raise InvalidModelFile(f"the projector file {model.mmproj_path} changed since it was checked; import '{model.name}' again")
