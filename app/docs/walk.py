"""Finding a collection's files: its roots walked (folders recursively, following links to folders
but never round a loop), hidden and tool folders skipped, only the suffixes a reader reads kept.
What cannot be walked or read is said in one sentence per path, and the walk goes on."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Folders no person's documents live in (tools' caches and checkouts' internals).
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".mypy_cache"})


@dataclass(frozen=True)
class Found:
    """A regular file to index, with its stat, or (`problem` set) a path left out and why."""

    path: str
    size: int = 0
    mtime_ns: int = 0
    problem: str | None = None


def walk_roots(roots: Iterable[str], supported: Callable[[Path], bool]) -> Iterator[Found]:
    """Each supported file under `roots` once (a file under two roots is given once), in a stable
    order, and each problem met on the way."""
    seen: set[str] = set()
    for root in roots:
        for found in _walk_root(Path(root), supported):
            if found.path not in seen:
                seen.add(found.path)
                yield found


def _walk_root(root: Path, supported: Callable[[Path], bool]) -> Iterator[Found]:
    try:
        st = os.stat(root)
    except OSError as exc:
        yield Found(str(root), problem=_sentence(exc, root))
        return
    if stat.S_ISDIR(st.st_mode):
        yield from _walk_dir(root, supported, ((st.st_dev, st.st_ino),))
    else:
        yield _file(root, st, supported, explicit=True) or Found(str(root), problem="is not a file Cove reads")


def _walk_dir(folder: Path, supported: Callable[[Path], bool], ancestors: tuple[tuple[int, int], ...]) -> Iterator[Found]:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield Found(str(folder), problem=_sentence(exc, folder))
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(".") or entry.name in SKIPPED_DIRS:
            continue
        try:
            st = os.stat(path)  # follows links
        except OSError as exc:
            if entry.is_symlink() and exc.errno != errno.ELOOP and not supported(path):
                continue  # a dangling link to something Cove would not read anyway
            yield Found(str(path), problem=_sentence(exc, path))
            continue
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                yield Found(str(path), problem="is a symbolic link back into a folder above it (a loop), so it is not followed")
                continue
            yield from _walk_dir(path, supported, (*ancestors, key))
        else:
            found = _file(path, st, supported, explicit=False)
            if found is not None:
                yield found


def _file(path: Path, st: os.stat_result, supported: Callable[[Path], bool], *, explicit: bool) -> Found | None:
    if not supported(path):
        return Found(str(path), problem=f"is a {path.suffix or 'suffix-less'} file, which Cove does not read") if explicit else None
    if not stat.S_ISREG(st.st_mode):
        return Found(str(path), problem="is not a regular file (a device, pipe or socket), so it is not read")
    return Found(str(path), size=st.st_size, mtime_ns=st.st_mtime_ns)


def _sentence(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link that loops back on itself, so it is not followed"
    if exc.errno == errno.ENOENT:
        return "is a link to something that no longer exists" if os.path.islink(path) else "no longer exists"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read (permission denied)"
    return f"cannot be read ({exc.strerror or exc})"
