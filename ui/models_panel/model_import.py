"""Importing local .gguf files from the window without freezing it: the header check and the
sha256 of a multi-gigabyte file run on a worker thread; registering in the library runs on
the UI thread, which owns the library's database connection.

Invariant: the hash is only used if the file's size and mtime are the same when it is
registered as when hashing began; otherwise the library hashes it again itself.

A projector (mmproj….gguf) dropped together with one model file is imported as that model's
projector; a projector dropped alone, or with several models, is refused with a sentence.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from PySide6.QtCore import QObject, Signal

from models.gguf_info import sha256_file
from models.gguf_validate import InvalidModelFile, read_gguf_header
from models.library import ModelLibrary
from models.projector import is_projector_name, read_projector_header
from ui.background import run_in_background


@dataclass(frozen=True)
class _Hashed:
    path: str
    sha256: str | None
    stat: tuple[int, float] | None  # (size, mtime) when hashing began
    error: str
    projector: _Hashed | None = None  # the model's projector, hashed the same way


class ModelImporter(QObject):
    """`import_files(paths)`; each file ends in `imported(InstalledModel)` or `failed(sentence)`."""

    imported = Signal(object)
    failed = Signal(str)
    busy_changed = Signal(bool)

    def __init__(self, library: ModelLibrary, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self._pending = 0

    @property
    def busy(self) -> bool:
        return self._pending > 0

    def import_files(self, paths: Sequence[str]) -> None:
        projectors = [str(p) for p in paths if is_projector_name(os.path.basename(str(p)))]
        models = [str(p) for p in paths if str(p) not in projectors]
        if projectors and len(models) != 1:
            self.failed.emit(
                f"{os.path.basename(projectors[0])} is a vision projector: add it together with the one model file it belongs to."
            )
            projectors = []
        for path in models:
            self._pending += 1
            self.busy_changed.emit(True)
            run_in_background(
                self,
                partial(_hash, path, projectors[0] if projectors else None),
                on_done=self._register,
                on_failed=partial(self._hash_failed, path),
                name="cove-import",
            )

    def _hash_failed(self, path: str, sentence: str) -> None:
        self._register(_Hashed(path, None, None, f"{os.path.basename(path)} could not be imported: {sentence}."))

    def _register(self, hashed: _Hashed) -> None:
        self._pending -= 1
        try:
            if hashed.error:
                self.failed.emit(hashed.error)
                return
            try:
                projector = hashed.projector
                model = self.library.import_file(
                    hashed.path,
                    sha256=_if_unchanged(hashed),
                    mmproj=projector.path if projector else None,
                    mmproj_sha256=_if_unchanged(projector) if projector else None,
                )
            except InvalidModelFile as exc:
                self.failed.emit(f"{os.path.basename(hashed.path)} was not imported: {exc}.")
            except OSError as exc:
                self.failed.emit(f"{os.path.basename(hashed.path)} could not be imported: {exc.strerror or exc}.")
            else:
                self.imported.emit(model)
        finally:
            if self._pending == 0:
                self.busy_changed.emit(False)


def _if_unchanged(hashed: _Hashed) -> str | None:
    """The hash taken off the UI thread, if the file's size and mtime are still what they were."""
    st = os.stat(hashed.path)
    return hashed.sha256 if (st.st_size, st.st_mtime) == hashed.stat else None


def _hash(path: str, projector: str | None = None) -> _Hashed:
    """Off the UI thread: the header checks and the sha256s (no Qt objects, no database)."""
    try:
        st = os.stat(path)
        read_gguf_header(path)  # a file that is not a model fails before it is read whole
        paired = None
        if projector is not None:
            read_projector_header(projector)
            pst = os.stat(projector)
            paired = _Hashed(projector, sha256_file(projector), (pst.st_size, pst.st_mtime), "")
        return _Hashed(path, sha256_file(path), (st.st_size, st.st_mtime), "", paired)
    except InvalidModelFile as exc:
        return _Hashed(path, None, None, f"{os.path.basename(path)} was not imported: {exc}.")
    except OSError as exc:
        return _Hashed(path, None, None, f"{os.path.basename(path)} could not be read: {exc.strerror or exc}.")
