"""The window's side of downloads: starts them through `app.downloads.DownloadManager`, turns
the events its reader threads deliver into queued signals, keeps one `DownloadRow` per
download for the view, and registers a finished download in the library.

Thread invariant: `DownloadManager` calls `on_event` on a reader thread; that callback only
emits `_event_arrived`, which Qt queues to the UI thread. Everything else here, including
`DownloadManager.register` (the library's database connection belongs to the UI thread),
runs on the UI thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.downloads import DownloadHandle, DownloadManager, discard, resumable
from models.download import partial
from models.download.protocol import Cancelled, DownloadEvent, Failed, Finished, Paused, Planned, Progress, Retrying, Started
from models.download.register import register_finished
from models.library import InstalledModel

# Row states the view shows (a superset of DownloadHandle.state: "retrying" is "running").
ACTIVE_STATES = ("starting", "running", "retrying")


@dataclass(frozen=True)
class DownloadRow:
    """What the downloads view shows for one download."""

    key: int
    repo: str
    label: str  # the model's file name as the listing showed it
    filenames: tuple[str, ...]
    revision: str | None
    state: str  # starting, running, retrying, paused, failed, cancelled, finished, unusable (not registered)
    bytes_done: int = 0
    total: int = 0
    speed: float = 0.0  # bytes/s
    eta: float | None = None  # seconds
    message: str = ""  # one sentence: why it failed, why it is retrying, what was installed
    model_name: str | None = None  # once registered in the library

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.total if self.total else 0.0


class DownloadBridge(QObject):
    """Owns the window's downloads. `start` raises (one sentence) when a download cannot start;
    everything after that arrives as `download_changed(DownloadRow)`."""

    download_changed = Signal(object)  # DownloadRow
    model_installed = Signal(object)  # InstalledModel, registered on the UI thread
    _event_arrived = Signal(int, object)  # from the manager's reader threads (queued)

    def __init__(self, manager: DownloadManager, token: Callable[[], str | None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.manager = manager
        self._token = token
        self._keys = itertools.count(1)
        self._handles: dict[int, DownloadHandle] = {}
        self._rows: dict[int, DownloadRow] = {}
        self._closed = False
        self._event_arrived.connect(self._on_event)

    # ---- commands ----------------------------------------------------------------------

    def start(self, repo: str, filenames: Sequence[str], revision: str | None, label: str | None = None) -> int:
        """Start downloading; the key names the download in later calls and rows.
        Raises NetworkRefused (offline) or DownloadError (already downloading), whose str() is a sentence."""
        key = next(self._keys)
        names = tuple(filenames)

        def on_event(event: DownloadEvent) -> None:  # reader thread
            try:
                self._event_arrived.emit(key, event)
            except RuntimeError:  # the bridge is gone (the window closed)
                pass

        self._rows[key] = DownloadRow(key, repo, label or names[0], names, revision, "starting")
        try:
            self._handles[key] = self.manager.start(repo, names, revision, self._token(), on_event)
        except BaseException:
            del self._rows[key]
            raise
        self.download_changed.emit(self._rows[key])
        return key

    def pause(self, key: int) -> None:
        if key in self._handles:
            self._handles[key].pause()

    def resume(self, key: int) -> None:
        """Continue a paused or failed download from its partial files."""
        handle = self._handles.get(key)
        if handle is None:
            return
        handle.resume()
        self._update(key, state="starting", message="")

    def cancel(self, key: int) -> None:
        """Stop and delete the partial files; the row goes once the child has exited."""
        if key in self._handles:
            self._handles[key].cancel()

    def forget(self, key: int) -> None:
        """Drop a finished or cancelled row from the list."""
        row = self._rows.get(key)
        if row is not None and row.state not in ACTIVE_STATES and row.state not in ("paused", "failed"):
            self._rows.pop(key, None)
            self._handles.pop(key, None)

    def rows(self) -> list[DownloadRow]:
        return list(self._rows.values())

    def row(self, key: int) -> DownloadRow | None:
        return self._rows.get(key)

    def handle(self, key: int) -> DownloadHandle | None:
        """The manager's handle of download `key` (its child process's pid, the state the child last
        reported), for a look below the rows; commands go through pause, resume and cancel here."""
        return self._handles.get(key)

    def is_downloading(self, repo: str, filename: str) -> bool:
        return any(r.repo == repo and filename in r.filenames and r.state in (*ACTIVE_STATES, "paused") for r in self._rows.values())

    def left_unfinished(self) -> list[partial.ResumableDownload]:
        """Partial downloads an earlier run left, which no row of this run is working on."""
        mine = {(r.repo, f) for r in self._rows.values() for f in r.filenames}
        return [d for d in resumable(self.manager.paths) if not any((d.repo, f) in mine for f in d.filenames)]

    def discard(self, left: partial.ResumableDownload) -> None:
        """Delete the partial files of a download an earlier run left (never one in use)."""
        discard(self.manager.paths, left)

    def shutdown(self, timeout: float = 3.0) -> None:
        """Stop every running download (its partial files stay resumable) within `timeout`."""
        self._closed = True
        self.manager.shutdown(timeout)

    # ---- events (UI thread) ------------------------------------------------------------

    def _on_event(self, key: int, event: DownloadEvent) -> None:
        if self._closed or key not in self._rows:
            return
        if isinstance(event, Planned):
            self._update(key, total=event.total, bytes_done=sum(event.have))
        elif isinstance(event, Started):
            self._update(key, state="running", total=event.total, bytes_done=event.resumed_from, message="")
        elif isinstance(event, Progress):
            self._update(key, state="running", bytes_done=event.bytes_done, total=event.total, speed=event.speed, eta=event.eta, message="")
        elif isinstance(event, Retrying):
            self._update(
                key,
                state="retrying",
                speed=0.0,
                eta=None,
                message=f"{_sentence(event.reason)} Trying again in {event.wait:.0f} s (attempt {event.attempt + 1}).",
            )
        elif isinstance(event, Paused):
            self._update(
                key,
                state="paused",
                bytes_done=event.bytes_done or self._rows[key].bytes_done,
                total=event.total or self._rows[key].total,
                speed=0.0,
                eta=None,
                message="",
            )
        elif isinstance(event, Failed):
            self._update(key, state="failed", speed=0.0, eta=None, message=event.message)
        elif isinstance(event, Cancelled):
            self._update(key, state="cancelled", speed=0.0, eta=None, message="Cancelled; the partial file was deleted.")
        elif isinstance(event, Finished):
            self._register(key, event)

    def _register(self, key: int, finished: Finished) -> None:
        try:
            model: InstalledModel = register_finished(self.manager.library, finished)  # with a vision model's projector
        except Exception as exc:  # noqa: BLE001 - the file stays where it is; say why it is not listed
            reason = str(exc).rstrip(".")
            self._update(
                key,
                state="unusable",
                speed=0.0,
                eta=None,
                message=f"Downloaded to {finished.path}, but it could not be added to the models list: {reason}.",
            )
            return
        row = self._rows[key]
        self._update(
            key,
            state="finished",
            bytes_done=row.total or row.bytes_done,
            speed=0.0,
            eta=None,
            model_name=model.name,
            message=f"Installed as {model.name}.",
        )
        self.model_installed.emit(model)

    def _update(self, key: int, **changes: Any) -> None:
        row = replace(self._rows[key], **changes)
        self._rows[key] = row
        self.download_changed.emit(row)


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return "The connection failed."
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
