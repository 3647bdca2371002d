"""Indexing for the window, off the UI thread: one worker thread runs the document index's writes
in order (make a collection, add folders or files, change its patterns, index, remove), each job
with a DocumentIndex connection of its own; and a Watcher per collection asks for a reindex after a
save to a file its patterns keep.

Threading invariants:
- The worker thread never touches a widget or the history; the UI thread never waits for it.
- What the runs report goes through a queue that a timer on the UI thread drains every
  DRAIN_MS: the latest Progress of each collection per drain, never a signal per file or chunk.
  The only signal the worker thread emits is `_woken`, once per job, so the timer starts.
- `hold()` is read on the worker thread (a threading.Event behind it): while a reply streams the
  run waits between files. `pause` takes effect between files (the indexer's should_stop).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.docs.embedding import Embedder
from app.docs.index_db import DocumentIndex, DocumentIndexError, UnknownCollection
from app.docs.indexer import index_collection
from app.docs.patterns import DEFAULT_PATTERNS, Patterns
from app.docs.types import Progress
from app.docs.watcher import Watcher
from app.errors import describe_error

DRAIN_MS = 100
CREATE, ADD, PATTERNS, INDEX, REMOVE = "create", "add", "patterns", "index", "remove"


@dataclass(frozen=True)
class Job:
    """One piece of work for the worker thread: `kind` (CREATE, ADD, PATTERNS, INDEX, REMOVE) on
    collection `name`; `roots` for CREATE and ADD, `patterns` for PATTERNS (all three then index)."""

    kind: str
    name: str
    roots: tuple[Path, ...] = ()
    patterns: Patterns | None = None


@dataclass(frozen=True)
class _Report:
    job: Job
    progress: Progress | None = None  # a run's progress (None: the job ended)
    ended: bool = False
    sentence: str = ""  # why the job failed ("" when it did not)


class IndexWorker(QObject):
    """Queue jobs with create / add_roots / reindex / remove; pause / resume a collection's runs.
    Signals (on the UI thread): `progress_changed(Progress)`, `job_finished(kind, name, Progress | None)`,
    `job_failed(kind, name, sentence)`, `watch_failed(name, sentence)`."""

    progress_changed = Signal(object)
    job_finished = Signal(str, str, object)
    job_failed = Signal(str, str, str)
    watch_failed = Signal(str, str)
    _woken = Signal()  # emitted by the worker thread, once per job: start draining

    def __init__(
        self,
        index_path: Path,
        *,
        embedder: Callable[[str], Embedder | None] | None = None,
        hold: Callable[[], bool] | None = None,
        watch: bool = True,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.index_path = Path(index_path)
        self._embedder = embedder
        self.hold = hold or (lambda: False)
        self._watch = watch
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._reports: queue.SimpleQueue[_Report] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued: set[tuple[str, str]] = set()  # (kind, name) waiting, so a burst of saves queues one run
        self._paused: set[str] = set()
        self._removing: set[str] = set()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.current: Job | None = None  # the job the worker thread runs now (read on the UI thread)
        self.latest: dict[str, Progress] = {}  # the last progress of each collection's run, on the UI thread
        self.watchers: dict[str, Watcher] = {}
        self._watched: dict[str, tuple[tuple[str, ...], Patterns]] = {}  # the roots each watcher watches, with its patterns
        self._drain = QTimer(self)
        self._drain.setInterval(DRAIN_MS)
        self._drain.timeout.connect(self._take_reports)
        self._woken.connect(self._on_woken, Qt.ConnectionType.QueuedConnection)

    # ---- commands (UI thread) ------------------------------------------------------------

    def create(self, name: str, roots: Sequence[Path]) -> None:
        """Make collection `name` of `roots`, then index it."""
        self._put(Job(CREATE, name, tuple(Path(r) for r in roots)))

    def add_roots(self, name: str, roots: Sequence[Path]) -> None:
        """Add folders or files to `name`, then index it."""
        self._put(Job(ADD, name, tuple(Path(r) for r in roots)))

    def set_patterns(self, name: str, patterns: Patterns) -> None:
        """Give `name` these include and exclude patterns (already checked), then index it: files
        they now leave out are dropped from the index, files they now keep are read."""
        self._put(Job(PATTERNS, name, patterns=patterns))

    def reindex(self, name: str) -> None:
        """Bring `name` up to date (new, changed and deleted files); nothing while it is paused."""
        with self._lock:
            if name in self._paused:
                return
        self._put(Job(INDEX, name))

    def pause(self, name: str) -> None:
        """Stop `name`'s run after the file being read; no run starts for it until `resume`."""
        with self._lock:
            self._paused.add(name)

    def resume(self, name: str) -> None:
        with self._lock:
            self._paused.discard(name)
        self._put(Job(INDEX, name))

    def is_paused(self, name: str) -> bool:
        with self._lock:
            return name in self._paused

    def is_busy(self, name: str) -> bool:
        """A job for `name` runs or waits."""
        current = self.current
        with self._lock:
            waiting = any(n == name for _k, n in self._queued)
        return waiting or (current is not None and current.name == name)

    def remove(self, name: str) -> None:
        """Stop `name`'s run and watcher and delete the collection from the index (the files stay)."""
        with self._lock:
            self._removing.add(name)
            self._paused.discard(name)
        self._unwatch(name)
        self._put(Job(REMOVE, name))

    def watch(self, roots_by_name: dict[str, Sequence[str]], patterns: dict[str, Patterns] | None = None) -> None:
        """Watch exactly these collections' roots (a reindex a moment after a save), each with its
        patterns (the defaults for a collection not in `patterns`)."""
        if not self._watch:
            return
        wanted = {n: (tuple(r), (patterns or {}).get(n, DEFAULT_PATTERNS)) for n, r in roots_by_name.items()}
        for name in [n for n in self.watchers if wanted.get(n) != self._watched.get(n)]:
            self._unwatch(name)  # gone, or its folders or patterns changed (watched again below)
        for name, (roots, kept) in wanted.items():
            if name not in self.watchers and roots:
                watcher = Watcher(name, list(roots), self.reindex, patterns=kept)
                watcher.start()
                self.watchers[name] = watcher
                self._watched[name] = (roots, kept)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop the run (between files), the watchers and the thread."""
        self._closing.set()
        self._drain.stop()
        for name in list(self.watchers):
            self._unwatch(name)
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout_s)

    # ---- the worker thread ----------------------------------------------------------------

    def _put(self, job: Job) -> None:
        if self._closing.is_set():
            return
        with self._lock:
            key = (job.kind, job.name)
            if job.kind == INDEX and key in self._queued:
                return
            self._queued.add(key)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cove-docs-index", daemon=True)
            self._thread.start()
        self._jobs.put(job)  # the worker thread's _woken starts the drain (this may run on a watcher's thread)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None or self._closing.is_set():
                return
            with self._lock:
                self._queued.discard((job.kind, job.name))
                if job.kind != REMOVE and job.name in self._removing:
                    continue
            self.current = job
            try:
                self._woken.emit()
            except RuntimeError:  # the window is gone
                return
            try:
                final = self._do(job)
            except Exception as exc:  # noqa: BLE001 - one sentence for the page
                self._reports.put(_Report(job, ended=True, sentence=_sentence(exc)))
            else:
                self._reports.put(_Report(job, final, ended=True))
            finally:
                self.current = None
                if job.kind == REMOVE:
                    with self._lock:
                        self._removing.discard(job.name)

    def _do(self, job: Job) -> Progress | None:
        if job.kind in (CREATE, ADD, PATTERNS, REMOVE):
            index = DocumentIndex(self.index_path)
            try:
                if job.kind == CREATE:
                    index.create(job.name, job.roots)
                elif job.kind == ADD:
                    index.add_roots(job.name, job.roots)
                elif job.kind == PATTERNS:
                    assert job.patterns is not None
                    include, exclude = job.patterns.for_storage()
                    index.set_patterns(job.name, include=include, exclude=exclude)
                else:
                    index.remove(job.name)
                    return None
            finally:
                index.close()
        name = job.name

        def stopping() -> bool:
            with self._lock:
                return name in self._paused or name in self._removing or self._closing.is_set()

        embedder = self._embedder(name) if self._embedder is not None else None
        return index_collection(
            self.index_path,
            name,
            embedder=embedder,
            on_progress=lambda p: self._reports.put(_Report(job, p)),
            should_stop=stopping,
            hold=self.hold,
        )

    # ---- back on the UI thread ------------------------------------------------------------

    def _on_woken(self) -> None:
        if not self._closing.is_set():
            self._drain.start()

    def _take_reports(self) -> None:
        latest: dict[str, Progress] = {}
        ended: list[_Report] = []
        while True:
            try:
                report = self._reports.get_nowait()
            except queue.Empty:
                break
            if report.progress is not None:
                latest[report.job.name] = report.progress
            if report.ended:
                ended.append(report)
        for name, progress in latest.items():
            self.latest[name] = progress
            self.progress_changed.emit(progress)
        for report in ended:
            if report.job.kind == REMOVE:
                self.latest.pop(report.job.name, None)
            if report.sentence:
                self.job_failed.emit(report.job.kind, report.job.name, report.sentence)
            else:
                self.job_finished.emit(report.job.kind, report.job.name, report.progress)
        for name, watcher in list(self.watchers.items()):
            if watcher.problem:
                self.watch_failed.emit(name, watcher.problem)
                self._unwatch(name)
        if self.current is None and self._jobs.empty() and not ended and not latest:
            self._drain.stop()

    def _unwatch(self, name: str) -> None:
        watcher = self.watchers.pop(name, None)
        self._watched.pop(name, None)
        if watcher is not None:
            watcher.stop()


def _sentence(exc: BaseException) -> str:
    if isinstance(exc, (ValueError, UnknownCollection, DocumentIndexError)):
        text = str(exc.args[0]) if isinstance(exc, UnknownCollection) and exc.args else str(exc)
    else:
        text = describe_error(exc)
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."
