"""Cove's folders and files are the person's alone: the data, model, log and cache folders are
made 0700 and what Cove writes in them 0600, as ssh and gpg keep theirs; a home an older Cove
made readable by other accounts (0755 folders, a 0644 history) is closed at start, once.

Other accounts on the machine can read any file whose folder and mode let them, whatever the
file holds: the history, the record, a conversation's saved KV state (its text, in numbers).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077  # what Cove's processes create is theirs alone: folders 0700, files 0600
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def keep_private() -> None:
    """From now on this process (and the engines it starts) creates folders 0700 and files 0600."""
    os.umask(PRIVATE_UMASK)


def make_private(folders: tuple[Path, ...]) -> list[Path]:
    """Create `folders` (0700) or, where one lets other accounts in, take their access away from it
    and everything in it. Returns the folders that were changed (to be said once)."""
    changed: list[Path] = []
    for folder in folders:
        existed = folder.exists()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # a file in the way raises FileExistsError
        if not existed:
            os.chmod(folder, 0o700)  # mkdir's mode passes through the umask
            continue
        if not folder.is_symlink() and folder.stat().st_mode & _OTHERS:
            _close(folder)
            changed.append(folder)
    return changed


def _close(folder: Path) -> None:
    """Take group and other access away from `folder` and all below it, leaving links (a model
    imported by link points at the person's own file, which is theirs to share) as they are."""
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            _drop_others(Path(root) / name)
    _drop_others(folder)


def _drop_others(path: Path) -> None:
    try:
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & _OTHERS:
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~_OTHERS)
    except OSError:  # a file gone meanwhile, or one owned by another account: left as it is
        pass
