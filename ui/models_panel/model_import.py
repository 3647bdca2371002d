"""Importing local .gguf files from the window without freezing it: the header check and the
sha256 of a multi-gigabyte file run on a worker thread; registering in the library runs on
the UI thread, which owns the library's database connection.

Invariant: the hash is only used if the file's size and mtime are the same when it is
registered as when hashing began; otherwise the library hashes it again itself.
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
from ui.background import run_in_background


@dataclass(frozen=True)
class _Hashed:
    path: str
    sha256: str | None
    stat: tuple[int, float] | None  # (size, mtime) when hashing began
    error: str


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
        for path in paths:
            self._pending += 1
            self.busy_changed.emit(True)
            run_in_background(
                self,
                partial(_hash, str(path)),
                on_done=self._register,
                on_failed=partial(self._hash_failed, str(path)),
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
                st = os.stat(hashed.path)
                same = (st.st_size, st.st_mtime) == hashed.stat
                model = self.library.import_file(hashed.path, sha256=hashed.sha256 if same else None)
            except InvalidModelFile as exc:
                self.failed.emit(f"{os.path.basename(hashed.path)} was not imported: {exc}.")
            except OSError as exc:
                self.failed.emit(f"{os.path.basename(hashed.path)} could not be imported: {exc.strerror or exc}.")
            else:
                self.imported.emit(model)
        finally:
            if self._pending == 0:
                self.busy_changed.emit(False)


def _hash(path: str) -> _Hashed:
    """Off the UI thread: the header check and the sha256 (no Qt objects, no database)."""
    try:
        st = os.stat(path)
        read_gguf_header(path)  # a file that is not a model fails before it is read whole
        return _Hashed(path, sha256_file(path), (st.st_size, st.st_mtime), "")
    except InvalidModelFile as exc:
        return _Hashed(path, None, None, f"{os.path.basename(path)} was not imported: {exc}.")
    except OSError as exc:
        return _Hashed(path, None, None, f"{os.path.basename(path)} could not be read: {exc.strerror or exc}.")
