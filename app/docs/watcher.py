"""Watching a collection's folders while the window is open (watchfiles, in a thread of its own), so
a saved file is indexed again seconds later: `on_change(name)` is called once per burst of changes
(watchfiles debounces them), from the watcher's thread. Only changes to files a reader reads (or to
folders) where the walk would find them count: watchfiles also watches the folders a link leads to,
and a change there, or in a file or folder the collection's patterns leave out (a Sphinx `_sources`
copy, `.git`), is not the collection's (app/docs/inside.py, app/docs/patterns.py).
stop() returns promptly: the thread checks its stop event every `step_ms`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import watchfiles

from app.docs.inside import Roots
from app.docs.patterns import DEFAULT_PATTERNS, Patterns
from app.docs.readers import is_supported

DEBOUNCE_MS = 1600
STEP_MS = 50


class Watcher:
    """Watches `roots` (folders, or files: their folder is watched) for collection `name`, whose
    `patterns` say which files in them count."""

    def __init__(
        self,
        name: str,
        roots: Sequence[Path | str],
        on_change: Callable[[str], None],
        *,
        patterns: Patterns = DEFAULT_PATTERNS,
        debounce_ms: int = DEBOUNCE_MS,
        step_ms: int = STEP_MS,
    ) -> None:
        self.name = name
        self._roots = [Path(r) for r in roots]
        self._on_change = on_change
        self.patterns = patterns
        self._debounce_ms, self._step_ms = debounce_ms, step_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None  # a sentence when the folders could not be watched

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"docs-watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        roots = [r.absolute() for r in self._roots if r.exists()]
        files = {r for r in roots if r.is_file()}
        dirs = [r for r in roots if r.is_dir()]
        paths = sorted({str(r.parent if r in files else r) for r in roots})
        if not paths:
            return
        inside = Roots(roots, self.patterns)

        def counts(_change: watchfiles.Change, path: str) -> bool:
            p = Path(path)
            if p in files or p in dirs:
                return True
            if any(d in p.parents for d in dirs):  # a readable file, or a folder, that the walk reaches
                return (is_supported(p) or not p.suffix) and inside.holds(p)
            return False  # beside a file root

        try:
            for _ in watchfiles.watch(
                *paths,
                watch_filter=_Filter(counts),
                debounce=self._debounce_ms,
                step=self._step_ms,
                stop_event=self._stop,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                if self._stop.is_set():
                    return
                self._on_change(self.name)
        except Exception as exc:  # a folder removed, too many watches: say so; the window goes on
            self.problem = f"The folders of {self.name} can no longer be watched ({exc}); reindex to pick up changes."


class _Filter(watchfiles.DefaultFilter):
    """watchfiles' default filter (tool folders, editors' swap files) and then `wanted`."""

    def __init__(self, wanted: Callable[[watchfiles.Change, str], bool]) -> None:
        super().__init__()
        self._wanted = wanted

    def __call__(self, change: watchfiles.Change, path: str) -> bool:
        return super().__call__(change, path) and self._wanted(change, path)
