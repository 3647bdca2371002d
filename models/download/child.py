"""The download process: `python -m models.download.child`.

Reads ONE job line (models.download.protocol.Job, with the token) from stdin, fetches every
file of the job at one commit into its partial file, verifies each against the Hub's
sha256, moves them into the models folder and reports `Finished`; events are JSON lines on
stdout. It never touches the database: the parent registers the model.

Being killed at any moment is fine: the partial files and their sidecars are always a
valid state to resume from. End of input on stdin means the parent is gone or wants it
to stop, and the process exits at once.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, TextIO

from models.download import partial
from models.download.protocol import GO, DownloadEvent, Failed, Finished, Job, Planned, Progress, ProtocolError, Retrying, Started, encode
from models.hub_errors import HubError, redact
from models.network import prepare_hub_import

if TYPE_CHECKING:  # the real import waits for prepare_hub_import() (see Download.run)
    from models.download.transfer import PartialWriter, RemoteFile

_PLACING = threading.Lock()  # held while verified files move into the models folder
CORRUPTED = "The downloaded file was corrupted ({why}); it was deleted — try again."


class Emitter:
    """Writes events to the parent; thread-safe. A parent that went away ends the process."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def emit(self, event: DownloadEvent) -> None:
        with self._lock:
            try:
                self._out.write(encode(event))
                self._out.flush()
            except (BrokenPipeError, OSError, ValueError):
                os._exit(0)


class Reporter:
    """Counts bytes and emits `Progress` from its own thread, at most every `interval` seconds
    (and once a second while stalled, so the speed shown falls to zero)."""

    WINDOW_S = 5.0

    def __init__(self, emitter: Emitter, total: int, done: int, interval: float) -> None:
        self._emitter = emitter
        self._total = total
        self._done = done
        self.received = 0  # only ever grows: the retry logic's measure of progress
        self._interval = interval
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, int]] = deque([(time.monotonic(), 0)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, n: int) -> None:
        with self._lock:
            self._done += n
            if n > 0:
                self.received += n

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def snapshot(self) -> Progress:
        now = time.monotonic()
        with self._lock:
            done, received = self._done, self.received
            self._samples.append((now, received))
            while len(self._samples) > 2 and now - self._samples[1][0] > self.WINDOW_S:
                self._samples.popleft()
            t0, r0 = self._samples[0]
        speed = (received - r0) / (now - t0) if now > t0 else 0.0
        eta = (self._total - done) / speed if speed > 0 else None
        return Progress(bytes_done=done, total=self._total, speed=round(speed, 1), eta=None if eta is None else round(eta, 1))

    def _loop(self) -> None:
        last_done, last_time = -1, 0.0
        while not self._stop.wait(self._interval):
            with self._lock:
                done = self._done
            if done != last_done or time.monotonic() - last_time >= 1.0:
                self._emitter.emit(self.snapshot())
                last_done, last_time = done, time.monotonic()


class Download:
    """One job, start to finish. Raises with a sentence (HubError) or what the Hub call raised."""

    def __init__(self, job: Job, emitter: Emitter) -> None:
        self.job = job
        self.emitter = emitter
        self.current: str | None = None  # the file being worked on, for error sentences
        self.pdir = Path(job.partial_dir)

    def run(self) -> None:
        # Imported here: huggingface_hub reads its settings at import (see models.network).
        from models.download import transfer

        self.t = transfer
        remotes = self._plan()
        have = [partial.partial_size(self.pdir, r.sha256) for r in remotes]
        self.emitter.emit(
            Planned(
                commit=remotes[0].commit,
                filenames=self.job.filenames,
                sizes=tuple(r.size for r in remotes),
                sha256s=tuple(r.sha256 for r in remotes),
                have=tuple(h if h <= r.size else 0 for h, r in zip(have, remotes)),
            )
        )
        if sys.stdin.readline().strip() != GO:
            return  # refused (e.g. not enough disk space) before anything was written
        threading.Thread(target=_exit_at_end_of_input, name="stdin-watch", daemon=True).start()
        writers = self._open(remotes)
        total = sum(r.size for r in remotes)
        resumed = sum(w.rehash_existing() for w in writers)
        self.emitter.emit(Started(total=total, resumed_from=resumed))
        reporter = Reporter(self.emitter, total, resumed, self.job.policy.progress_interval)
        reporter.start()
        try:
            for remote, writer in zip(remotes, writers):
                self._fetch(remote, writer, reporter)
        finally:
            reporter.stop()
        self.emitter.emit(reporter.snapshot())
        with _PLACING:
            finished = self._place(remotes, writers)
        self.emitter.emit(finished)

    def _retrying(self, attempt: int, reason: str, wait: float) -> None:
        self.emitter.emit(Retrying(attempt=attempt, reason=reason, wait=round(wait, 2)))

    def _plan(self) -> list[RemoteFile]:
        """Every file's metadata; the first file pins the commit for all the others."""
        job, revision = self.job, self.job.revision
        remotes: list[RemoteFile] = []
        for name in job.filenames:
            self.current = name
            remote = self.t.with_retries(
                lambda: self.t.resolve(job.repo, name, revision, job.token, job.policy), job.policy, self._retrying
            )
            revision = remote.commit
            remotes.append(remote)
        self.current = None
        if len({r.sha256 for r in remotes}) < len(remotes):
            raise HubError("Two files of this download have the same contents; Cove cannot tell them apart.")
        for r in remotes:
            if partial.in_use(partial.part_path(self.pdir, r.sha256)):
                raise HubError(_busy(r.filename))
        return remotes

    def _open(self, remotes: list[RemoteFile]) -> list[PartialWriter]:
        """Sidecars first (durable), then the partial files, opened without truncating and locked."""
        writers = []
        for r in remotes:
            partial.write_record(self.pdir, partial.new_record(self.job.repo, r.filename, r.commit, r.size, r.sha256, self.job.filenames))
            f = partial.open_partial(self.pdir, r.sha256)
            if not partial.try_lock(f):
                raise HubError(_busy(r.filename))
            writers.append(self.t.PartialWriter(f, r.size))
        return writers

    def _fetch(self, remote: RemoteFile, writer: PartialWriter, reporter: Reporter) -> None:
        """The rest of one file, with retries; then its sha256 against the Hub's."""
        job, t = self.job, self.t
        self.current = remote.filename
        fresh = [remote]

        def attempt() -> None:
            # After a failure ask again where the bytes are: a CDN's signed URL expires.
            target = fresh.pop() if fresh else t.resolve(job.repo, remote.filename, remote.commit, job.token, job.policy)
            if (target.sha256, target.size) != (remote.sha256, remote.size):
                raise HubError(f"{remote.filename} changed on the Hub during the download; try again.")
            t.fetch_rest(target, writer, job.token, job.policy, reporter.add)

        try:
            t.with_retries(attempt, job.policy, self._retrying, progress=lambda: reporter.received)
            why = None if writer.hexdigest() == remote.sha256 else "sha256 mismatch"
        except t.Corrupted as exc:
            why = str(exc)
        if why:
            writer.f.close()
            partial.remove_partial(self.pdir, remote.sha256)
            raise HubError(CORRUPTED.format(why=why))

    def _place(self, remotes: list[RemoteFile], writers: list[PartialWriter]) -> Finished:
        """Durable, then moved into the models folder; a sidecar goes only after its file moved."""
        from models.download import place

        for writer in writers:
            os.fsync(writer.f.fileno())
            writer.f.close()
        dests = place.destinations(Path(self.job.dest_dir), self.job.filenames, [r.size for r in remotes], [r.sha256 for r in remotes])
        for remote, dest in zip(remotes, dests):
            place.move_into(partial.part_path(self.pdir, remote.sha256), dest)
            partial.sidecar_path(self.pdir, remote.sha256).unlink(missing_ok=True)
        return Finished(
            repo=self.job.repo,
            commit=remotes[0].commit,
            filenames=self.job.filenames,
            paths=tuple(str(d) for d in dests),
            sha256s=tuple(r.sha256 for r in remotes),
        )


def _busy(filename: str) -> str:
    return f"{PurePath(filename).name} is already being downloaded by another Cove window or command."


def _sentence(exc: Exception, job: Job, filename: str | None) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return (
            f"The disk holding {job.partial_dir} is full. What was downloaded so far is kept: "
            "free some space and start the download again to continue."
        )
    from models.hub_errors import describe_hub_error

    return describe_hub_error(exc, job.repo, filename)


def _exit_at_end_of_input() -> None:
    """The parent closes our stdin to stop us (pause, cancel, quit) or dies: either way, go,
    but not halfway through moving a split model's parts into place."""
    while sys.stdin.readline():
        pass
    with _PLACING:
        os._exit(0)


def _event_stream() -> TextIO:
    """A private copy of stdout for events; fd 1 then points at stderr, so a stray print
    from a library can never corrupt the event stream."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", encoding="utf-8")


def main() -> int:
    emitter = Emitter(_event_stream())
    prepare_hub_import()
    try:
        job = Job.from_line(sys.stdin.readline())
    except ProtocolError as exc:
        emitter.emit(Failed(f"The download process got no valid job ({exc})."))
        return 2
    download = Download(job, emitter)
    try:
        download.run()
    except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence for the person
        emitter.emit(Failed(redact(_sentence(exc, job, download.current))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
