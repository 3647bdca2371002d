"""Model downloads from the parent's side: starting them (one child process each, see
app.download_process), registering what finished, finding what an earlier run left, and
start-up tidying.

Qt-free. Events reach `on_event` on a reader thread (the window bridges them to signals);
`DownloadManager.register` must run on the thread that owns the library's database
connection (the UI thread; the CLI's only thread), because only that connection writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.download_process import ACTIVE, DownloadHandle, child_command, child_environment
from app.paths import Paths
from models.download import partial, preflight
from models.download.cleanup import CleanupReport
from models.download.cleanup import cleanup_orphans as _cleanup_orphans
from models.download.protocol import DownloadEvent, Finished, TransferPolicy
from models.gguf_validate import InvalidModelFile
from models.hub_files import refusal_of
from models.library import InstalledModel, ModelLibrary
from models.network import NetworkGate

__all__ = [
    "DownloadManager",
    "DownloadHandle",
    "DownloadError",
    "child_command",
    "child_environment",
    "resumable",
    "discard",
    "cleanup_orphans",
]


class DownloadError(RuntimeError):
    """A download could not be started; str() is one sentence."""


def resumable(paths: Paths) -> list[partial.ResumableDownload]:
    """Downloads an earlier run left unfinished, so the window can offer to resume them."""
    return partial.resumable(paths.partial_downloads_dir)


def discard(paths: Paths, left: partial.ResumableDownload) -> None:
    """Delete the partial files of a download an earlier run left (never one in use)."""
    partial.discard(paths.partial_downloads_dir, left.repo, left.filenames)


def cleanup_orphans(paths: Paths, models_dirs: Sequence[Path] = ()) -> CleanupReport:
    """Delete what interrupted downloads left that cannot be resumed; keep what can.
    Call at start-up, before this process starts any download."""
    return _cleanup_orphans(
        paths.partial_downloads_dir,
        cove_dirs=(paths.cache_dir, paths.data_dir, paths.models_dir),
        models_dirs=(paths.models_dir, *models_dirs),
    )


class DownloadManager:
    """Starts downloads and keeps track of the running ones (Qt-free; see the module docstring)."""

    def __init__(
        self,
        paths: Paths,
        library: ModelLibrary,
        gate: NetworkGate,
        models_dir: Callable[[], Path],
        *,
        policy: TransferPolicy = TransferPolicy(),
        check_space: Callable[[Path, Path, int, int], str | None] = preflight.check_disk_space,
    ) -> None:
        self.paths = paths
        self.library = library
        self.gate = gate
        self.models_dir = models_dir  # read at each start: the setting may change between downloads
        self.policy = policy
        self.check_space = check_space
        self._lock = threading.Lock()
        self._handles: list[DownloadHandle] = []

    @classmethod
    def for_core(cls, core: Any, **kwargs: Any) -> DownloadManager:
        """The manager for an `app.core.Core` (its paths, library, gate and models-folder setting)."""
        return cls(core.paths, core.library, core.network, lambda: core.models_dir, **kwargs)

    def start(
        self,
        repo_id: str,
        filenames: Sequence[str],
        revision: str | None,
        token: str | None,
        on_event: Callable[[DownloadEvent], None],
    ) -> DownloadHandle:
        """Start downloading `filenames` (one file, or every part of a split model) of `repo_id`.

        Raises NetworkRefused while offline (before any connection) and DownloadError when
        a name is not a plain path inside the repository or the same files are already
        downloading. Everything later arrives as events.
        """
        names = tuple(filenames)
        if not names:
            raise DownloadError("Name at least one file to download.")
        refusal = next((r for r in map(refusal_of, names) if r), None)
        if refusal:  # before the gate and the child: `..` would leave the pinned resolve/<commit>/ URL
            raise DownloadError(refusal)
        self.gate.check("download")
        handle = DownloadHandle(self, repo_id, names, revision, token, on_event)
        self._track(handle)
        try:
            handle._launch()
        except BaseException:
            with self._lock:
                self._handles.remove(handle)
            raise
        return handle

    def active(self) -> list[DownloadHandle]:
        with self._lock:
            return list(self._handles)

    def register(self, finished: Finished) -> InstalledModel:
        """Put a finished download in the library (hash already verified, so not read again), with
        its projector when it brought one. Call on the thread that owns the library's database
        connection."""
        from models.download.register import register_finished

        return register_finished(self.library, finished)

    def find_installed(
        self, repo_id: str, filename: str, revision: str | None = None, *, sha256: str | None = None
    ) -> InstalledModel | None:
        """An intact installed model that is this file: the same bytes when `sha256` is known
        (wherever they came from), else downloaded from this repo file (at `revision`, if given)."""
        for model in self.library.list():
            if sha256:
                same = model.sha256 == sha256
            else:
                same = model.repo == repo_id and model.file == filename and revision in (None, model.revision)
            if same:
                try:
                    self.library.check_unchanged(model)
                except InvalidModelFile:  # gone or changed: not installed
                    continue
                return model
        return None

    def shutdown(self, timeout: float = 3.0) -> None:
        """Stop every running download (their partial files stay resumable) within `timeout`."""
        handles = self.active()
        for h in handles:
            h.pause()
        deadline = time.monotonic() + timeout
        for h in handles:
            if h.wait(max(0.0, deadline - time.monotonic())) is None:
                h.kill()
        for h in handles:
            h.wait(max(0.1, deadline - time.monotonic()))

    def _track(self, handle: DownloadHandle) -> None:
        with self._lock:
            if handle in self._handles:
                return
            if any(h.repo == handle.repo and set(h.filenames) & set(handle.filenames) for h in self._handles):
                raise DownloadError(f"{handle.filenames[0]} is already downloading.")
            self._handles.append(handle)

    def _ended(self, handle: DownloadHandle) -> None:
        with self._lock:
            if handle in self._handles and handle.state not in ACTIVE:
                self._handles.remove(handle)
