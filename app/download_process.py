"""One download's child process from the parent's side: starting it, reading its events,
the disk-space go-ahead, pause / resume / cancel, and what its end means. The process itself
(spawning, the pipes, the reader thread, the stderr tail, reaping) is an app/child_process.py
ChildProcess on the child's stdin and stdout.

Process invariants: the token goes to the child on its stdin, never in its arguments or
environment (`child_environment()` is `models.network.hub_environment()`); the child runs
in its own session, so a Ctrl-C in the terminal reaches only the parent, which then stops
the child deliberately; closing the child's stdin stops it at once, and a child that
lingers is killed after `STOP_GRACE_S`. A stopped child's partial files stay resumable.
`on_event` runs on the handle's reader thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol

from app.child_command import child_command as _child_command
from app.child_process import ChildGone, ChildProcess, describe_exit, with_project_importable
from app.paths import Paths
from models.download import partial
from models.download.protocol import (
    GO,
    Cancelled,
    DownloadEvent,
    Failed,
    Finished,
    Job,
    Paused,
    Planned,
    Progress,
    Started,
    TransferPolicy,
    decode,
)
from models.hub_errors import redact
from models.network import NetworkGate, hub_endpoint, hub_environment

STOP_GRACE_S = 2.0  # a stopped child that has not exited by then is killed

State = Literal["starting", "running", "paused", "cancelled", "failed", "finished"]
ACTIVE: tuple[State, ...] = ("starting", "running")


def child_command() -> list[str]:
    """How the download child is started: `python -m models.download.child`, or the frozen
    app's own executable (app/child_command.py)."""
    return _child_command("models.download.child")


def child_environment() -> dict[str, str]:
    """huggingface_hub's import environment (no token, no telemetry, no Xet); Cove importable."""
    return with_project_importable(hub_environment())


class HandleOwner(Protocol):
    """What a DownloadHandle needs from the manager that started it (app.downloads.DownloadManager)."""

    paths: Paths
    gate: NetworkGate
    policy: TransferPolicy
    models_dir: Callable[[], Path]  # read at each (re)start
    check_space: Callable[[Path, Path, int, int], str | None]  # the disk-space preflight

    def _track(self, handle: DownloadHandle) -> None: ...  # raises DownloadError for a duplicate

    def _ended(self, handle: DownloadHandle) -> None: ...


class DownloadHandle:
    """One download. Methods are safe from any thread; `on_event` runs on the reader thread."""

    def __init__(
        self,
        manager: HandleOwner,
        repo: str,
        filenames: tuple[str, ...],
        revision: str | None,
        token: str | None,
        on_event: Callable[[DownloadEvent], None],
    ) -> None:
        self._manager = manager
        self.repo = repo
        self.filenames = filenames
        self.revision = revision
        self._token = token  # kept in memory only, for resume()
        self._on_event = on_event
        self._lock = threading.Lock()
        self._state: State = "starting"
        self._stop: Literal["pause", "cancel"] | None = None
        self._done = threading.Event()
        self._child: ChildProcess[DownloadEvent] | None = None  # the current child process
        self._refusal: str | None = None  # the disk-space preflight's refusal of the current child
        self.planned: Planned | None = None
        self.progress: Progress | None = None
        self.result: Finished | None = None
        self.error: str | None = None
        self.last_event: DownloadEvent | None = None
        self.dest_dir: Path = manager.models_dir()  # the models folder; read again at each (re)start

    @property
    def state(self) -> State:
        return self._state

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    # -- control -----------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop the child and keep the partial files; `resume()` continues from them."""
        self._request_stop("pause")

    def cancel(self) -> None:
        """Stop the child and delete the partial files (once it has exited)."""
        with self._lock:
            cancelled_now = self._state in ("paused", "failed")  # no child runs: delete right away
            if cancelled_now:
                self._state = "cancelled"
        if cancelled_now:
            self._delete_partials()
            self._deliver(Cancelled())
            return
        self._request_stop("cancel")

    def resume(self) -> None:
        """Start a new child that continues from the partial files (after a pause or a failure)."""
        with self._lock:
            before = self._state
            if before not in ("paused", "failed"):
                return
            self._state = "starting"
            self._stop = None
            self.error = None
            self._done.clear()
        try:
            self._manager._track(self)
            self._launch()
        except BaseException:
            with self._lock:
                self._state = before
                self._done.set()
            self._manager._ended(self)
            raise

    def kill(self) -> None:
        """End the child at once (after pause() or cancel(), if it has not gone by itself)."""
        if self._child is not None:
            self._child.kill()

    def wait(self, timeout: float | None = None) -> DownloadEvent | None:
        """Block until the current child has ended; the last event (Finished, Failed, Paused,
        Cancelled), or None on timeout."""
        if not self._done.wait(timeout):
            return None
        return self.last_event

    # -- the child ---------------------------------------------------------------------------

    def _launch(self) -> None:
        m = self._manager
        activity = m.gate.use("download", f"{hub_endpoint()}/{self.repo}")
        activity.__enter__()  # raises NetworkRefused while offline: nothing is started
        try:
            self.dest_dir = m.models_dir()
            job = Job(
                repo=self.repo,
                filenames=self.filenames,
                revision=self.revision,
                token=self._token,
                partial_dir=str(m.paths.partial_downloads_dir),
                dest_dir=str(self.dest_dir),
                policy=m.policy,
            )
            child: ChildProcess[DownloadEvent] = ChildProcess(
                child_command(),
                env=child_environment(),
                decode=decode,
                on_message=self._on_message,
                on_exit=lambda child, code, stderr_tail: self._on_exit(activity, code, stderr_tail),
                name="download",
                channel="stdio",
                reap_s=STOP_GRACE_S + 1.0,
            )
        except BaseException:
            activity.__exit__(None, None, None)
            raise
        self._refusal = None
        self._child = child
        try:
            child.send_line(job.to_line().encode("ascii"))
        except ChildGone:
            pass  # the child died at once; the reader reports how
        child.start_reading()

    def _on_message(self, child: ChildProcess[DownloadEvent], event: DownloadEvent) -> bool:
        """One event from the child; True stops the reading (the preflight refused the download)."""
        if isinstance(event, Planned):
            self.planned = event
            self._refusal = self._go_or_refuse(child, event)
            if self._refusal:
                return True
        elif isinstance(event, Started):
            with self._lock:
                if self._state == "starting":
                    self._state = "running"
        elif isinstance(event, Progress):
            self.progress = event
        elif isinstance(event, Finished):
            self.result = event
        elif isinstance(event, Failed):
            self.error = event.message
        if isinstance(event, (Finished, Failed)):
            return False  # delivered once the process is gone, as the final word
        self._deliver(event)
        return False

    def _on_exit(self, activity: AbstractContextManager[Any], code: int | None, stderr_tail: str) -> None:
        activity.__exit__(None, None, None)
        self._finish(code, self._refusal, stderr_tail)

    def _go_or_refuse(self, child: ChildProcess[DownloadEvent], planned: Planned) -> str | None:
        """The disk-space preflight, in this process, before any byte of a body is fetched."""
        m = self._manager
        refusal = m.check_space(m.paths.partial_downloads_dir, self.dest_dir, planned.remaining, planned.total)
        with self._lock:
            stopping = self._stop is not None
        if refusal or stopping:
            child.close_input()
        else:
            try:
                child.send_line(GO.encode("ascii") + b"\n")
            except ChildGone:  # the child is gone, or a stop closed its input meanwhile
                pass
        return refusal

    def _finish(self, code: int | None, refusal: str | None, stderr: str) -> None:
        event: Finished | Cancelled | Paused | Failed
        with self._lock:
            stop = self._stop
            if self.result is not None:
                state, event = "finished", self.result
            elif stop == "cancel":
                state, event = "cancelled", Cancelled()
            elif stop == "pause":
                done = self.progress.bytes_done if self.progress else sum(self.planned.have) if self.planned else 0
                total = self.planned.total if self.planned else 0
                state, event = "paused", Paused(bytes_done=done, total=total)
            else:
                message = (
                    refusal
                    or self.error
                    or redact(
                        f"The download process stopped unexpectedly ({describe_exit(code, stderr)}); "
                        "start the download again to continue where it stopped."
                    )
                )
                self.error = message
                state, event = "failed", Failed(message)
        if state == "cancelled":
            self._delete_partials()
        with self._lock:
            self._state = state  # type: ignore[assignment]
        self._deliver(event)
        self._done.set()
        self._manager._ended(self)

    def _request_stop(self, why: Literal["pause", "cancel"]) -> None:
        with self._lock:
            if self._state not in ACTIVE:
                return
            self._stop = why
            child = self._child
        if child is None:
            return
        child.close_input()  # the child exits at end of input
        child.kill_after(STOP_GRACE_S)

    def _delete_partials(self) -> None:
        folder = self._manager.paths.partial_downloads_dir
        for sha in self.planned.sha256s if self.planned else ():
            if not partial.in_use(partial.part_path(folder, sha)):
                partial.remove_partial(folder, sha)
        partial.discard(folder, self.repo, self.filenames)  # and what an earlier run left of them

    def _deliver(self, event: DownloadEvent) -> None:
        self.last_event = event
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a listener's bug must not stop the download's bookkeeping
            import traceback

            traceback.print_exc()
