"""Putting a finished download in the library: the model (every part of a split one), and a vision
model's projector, the download's last file (models/hub_files.py `GGUFEntry.filenames`), with it.
A download of the projector alone pairs it with the model already installed from that repo file.
Call on the thread that owns the library's database connection."""

from __future__ import annotations

from models.download.protocol import Finished
from models.library import InstalledModel, ModelLibrary
from models.projector import is_projector_name


def projector_index(filenames: tuple[str, ...]) -> int | None:
    """Where the projector is among a download's files: the last one when it has a projector's
    name (0 when it is the only file); None for a text model."""
    return len(filenames) - 1 if filenames and is_projector_name(filenames[-1]) else None


def register_finished(library: ModelLibrary, finished: Finished, model: InstalledModel | None = None) -> InstalledModel:
    """Register `finished` (hashes already verified, so no file is read twice). `model`: the
    installed model a projector-only download belongs to."""
    at = projector_index(finished.filenames)
    if at == 0:
        if model is None:
            raise ValueError("a download of a projector alone needs the model it belongs to")
        return library.set_projector(model.name, finished.paths[0], sha256=finished.sha256s[0])
    return library.import_file(
        finished.path,
        source="download",
        sha256=finished.sha256,
        repo=finished.repo,
        file=finished.filenames[0],
        revision=finished.commit,
        mmproj=finished.paths[at] if at is not None else None,
        mmproj_sha256=finished.sha256s[at] if at is not None else None,
    )
