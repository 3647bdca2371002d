"""Finding a collection's files: its roots walked (real folders recursively), only the files its
patterns keep (app/docs/patterns.py) and a reader reads taken. A folder an exclude pattern matches
is not walked into (its files are only counted, by name); it, and every file a pattern or its type
leaves out, is given with the sentence saying why (`left_out`), so none is left out silently. A link
is never walked through: one that leads to a file or folder the collection holds adds nothing (that
is walked where it is, so it is indexed once), and one that leads out of the collection's folders,
or into a left-out folder, is given with a sentence (app/docs/inside.py). What cannot be walked or
read is said in one sentence per path (`problem`), and the walk goes on. Patterns apply below the
folders given, never to a root itself: a file or folder the person named is taken.

What a Found without a problem or left_out guarantees, as of the scan: it was a regular file, not a
link, met in a folder reached from its root through real folders only (on POSIX each folder is
opened O_NOFOLLOW relative to the one above, so a folder swapped for a link mid-walk is not
entered), or it is a file root the person named (which may be a link); its path names it under that
root as given, and `dev`/`ino` are its identity. The path is only a name: a reader that opens it and
compares fstat's identity with `dev`/`ino` catches a file or folder swapped for a link since."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.docs.inside import Place, Roots
from app.docs.patterns import COUNT_CAP, DEFAULT_PATTERNS, Patterns, by_pattern, by_type, not_included

__all__ = ["Found", "walk_roots"]

# Folders opened by descriptor, each relative to the one above (POSIX); elsewhere by path.
_BY_FD = {os.open, os.stat} <= os.supports_dir_fd and os.scandir in os.supports_fd and hasattr(os, "O_NOFOLLOW")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_JUNCTION = 0xA0000003  # stat.IO_REPARSE_TAG_MOUNT_POINT, named on Windows only
_Ancestors = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Found:
    """A regular file to index, with its stat; or (`problem` set) a path that could not be taken,
    and why; or (`left_out` set) a file or folder left out unread by a pattern or its type, and why."""

    path: str
    size: int = 0
    mtime_ns: int = 0
    problem: str | None = None
    dev: int = 0
    ino: int = 0
    left_out: str | None = None


def walk_roots(roots: Iterable[str], supported: Callable[[Path], bool], patterns: Patterns = DEFAULT_PATTERNS) -> Iterator[Found]:
    """Each supported file under `roots` that `patterns` keep, once (a file under two roots is given
    once), in a stable order; each problem met on the way; and what was left out, with why."""
    walk = _Walk(Roots(roots, patterns), supported)
    seen: set[str] = set()
    for root in walk.inside.given:
        for found in walk.root(root):
            if found.path not in seen:
                seen.add(found.path)
                yield found


class _Walk:
    def __init__(self, inside: Roots, supported: Callable[[Path], bool]) -> None:
        self.inside, self.supported, self.patterns = inside, supported, inside.patterns

    def root(self, root: Path) -> Iterator[Found]:
        try:
            st = os.stat(root)  # a root that is a link was named by the person: followed
            if not stat.S_ISDIR(st.st_mode):
                yield self.file(root, st, explicit=True) or Found(str(root), problem="is not a file Cove reads")
                return
            fd = os.open(root, _DIR_FLAGS) if _BY_FD else None
        except OSError as exc:
            yield Found(str(root), problem=_sentence(exc, root))
            return
        try:
            yield from self.folder(root, fd, ((st.st_dev, st.st_ino),), "")
        finally:
            if fd is not None:
                os.close(fd)

    def folder(self, folder: Path, fd: int | None, ancestors: _Ancestors, rel: str) -> Iterator[Found]:
        """The folder's entries; `rel`: its path from the root, with "/" ("" for the root)."""
        try:
            with os.scandir(folder if fd is None else fd) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            yield Found(str(folder), problem=_sentence(exc, folder))
            return
        for name in names:
            path, at = folder / name, f"{rel}/{name}" if rel else name
            try:
                st = os.lstat(path) if fd is None else os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                pattern = self.patterns.excluded_by(at, False)
                yield Found(str(path), left_out=by_pattern(pattern)) if pattern else Found(str(path), problem=_sentence(exc, path))
                continue
            link, is_dir = _is_link(st), stat.S_ISDIR(st.st_mode)
            pattern = self.patterns.excluded_by(at, is_dir or (link and os.path.isdir(path)))
            if pattern is not None:
                if is_dir and path not in self.inside.given:  # a folder also given as a root is walked as one
                    files, more = _count_files(path)
                    yield Found(str(path), left_out=by_pattern(pattern, files=files, more=more))
                elif not is_dir:
                    yield Found(str(path), left_out=by_pattern(pattern))
                continue
            if link:
                found = self.link(path)
            elif is_dir:
                yield from self.subfolder(path, fd, st, ancestors, at)
                continue
            elif self.patterns.include and not self.patterns.included(at):
                found = Found(str(path), left_out=not_included(self.patterns.include))
            else:
                found = self.file(path, st, explicit=False)
            if found is not None:
                yield found

    def subfolder(self, path: Path, fd: int | None, st: os.stat_result, ancestors: _Ancestors, rel: str) -> Iterator[Found]:
        key = (st.st_dev, st.st_ino)
        if key in ancestors:  # a mount of a folder above it
            yield Found(str(path), problem="is a folder that leads back into a folder above it (a loop), so it is not walked")
            return
        try:
            sub = None if fd is None else os.open(path.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            problem = "became a link while it was being walked, so it is not followed" if exc.errno == errno.ELOOP else None
            yield Found(str(path), problem=problem or _sentence(exc, path))
            return
        try:
            yield from self.folder(path, sub, (*ancestors, key), rel)
        finally:
            if sub is not None:
                os.close(sub)

    def link(self, path: Path) -> Found | None:
        """A link met in a folder: a sentence when it leads out of the collection's folders, into a
        hidden one, or back round a loop; nothing when it leads to what the walk finds where it is."""
        try:
            st = os.stat(path)  # follows links
        except OSError as exc:
            if exc.errno != errno.ELOOP and not self.supported(path):
                return Found(str(path), left_out=by_type(path.suffix))  # a dangling link to something Cove would not read anyway
            return Found(str(path), problem=_sentence(exc, path))
        real = os.path.realpath(path)
        place = self.inside.place(real)
        is_dir = stat.S_ISDIR(st.st_mode)
        if place.path is None:
            if is_dir or self.supported(path) or self.supported(Path(real)):
                return Found(str(path), problem=_left_out(place, real, is_dir))
            return Found(str(path), left_out=by_type(path.suffix))
        parent = os.path.realpath(path.parent)
        if is_dir and (parent == real or parent.startswith(real.rstrip(os.sep) + os.sep)):
            return Found(str(path), problem="is a symbolic link back into a folder above it (a loop), so it is not followed")
        return None

    def file(self, path: Path, st: os.stat_result, *, explicit: bool) -> Found | None:
        if not self.supported(path):
            sentence = by_type(path.suffix)
            return Found(str(path), problem=sentence) if explicit else Found(str(path), left_out=sentence)
        if not stat.S_ISREG(st.st_mode):
            return Found(str(path), problem="is not a regular file (a device, pipe or socket), so it is not read")
        return Found(str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, dev=st.st_dev, ino=st.st_ino)


def _is_link(st: os.stat_result) -> bool:
    """A symbolic link, or on Windows a junction."""
    return stat.S_ISLNK(st.st_mode) or getattr(st, "st_reparse_tag", 0) == _JUNCTION


def _left_out(place: Place, real: str, is_dir: bool) -> str:
    kind = "folder" if is_dir else "file"
    target = os.fsencode(real).decode("utf-8", "replace")
    if place.hidden is None:
        return (
            f"is a link to a {kind} outside the collection's folders ({target}), so it is left out; "
            f"add that {kind} to the collection to include it"
        )
    if Path(real).name == place.hidden:
        return (
            f"is a link to a {kind} that the pattern `{place.pattern}` leaves out ({target}), so it is left out; "
            f"add that {kind} to the collection to include it"
        )
    return (
        f"is a link into the folder {place.hidden}, which the pattern `{place.pattern}` leaves out ({target}), "
        "so it is left out; add that folder to the collection to include it"
    )


def _count_files(folder: Path) -> tuple[int, bool]:
    """How many files a left-out folder holds, at any depth, up to COUNT_CAP: names only, by
    scandir's own entry types (no file is opened or stat'ed, no link followed); True: there are more."""
    count, stack = 0, [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                        continue
                    count += 1
                    if count >= COUNT_CAP:
                        return count, True
        except OSError:
            continue  # an unreadable folder inside: its files are not counted
    return count, False


def _sentence(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link that loops back on itself, so it is not followed"
    if exc.errno == errno.ENOENT:
        return "is a link to something that no longer exists" if os.path.islink(path) else "no longer exists"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read (permission denied)"
    return f"cannot be read ({exc.strerror or exc})"
