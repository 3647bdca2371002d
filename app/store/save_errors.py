"""What a failed write of the history means for the person: the sentence for a reply that
could not be saved (the disk is full, the file is locked), saying exactly what was kept; and
whether a failure was a full disk at all (`full_disk_behind`), which SQLite does not always
say: with no space left, opening a history in WAL mode can fail with "disk I/O error" instead
of SQLITE_FULL, so an I/O error counts as a full disk when the data folder has (nearly) no
space left."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

_SQLITE_FULL = 13
_SQLITE_IOERR = 10
NEARLY_FULL_BYTES = 1 << 20  # free space below which an I/O error is taken for a full disk


def is_disk_full(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.Error):
        return isinstance(exc, OSError) and exc.errno == 28  # ENOSPC
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) == _SQLITE_FULL:
        return True
    return "disk is full" in str(exc).lower()


def _is_io_error(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) == _SQLITE_IOERR
    return "disk i/o error" in str(exc).lower()


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it was raised from or while handling, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def free_bytes(folder: Path) -> int | None:
    """Free space (for this user) on the filesystem holding `folder` or its nearest existing parent."""
    for candidate in (folder, *folder.parents):
        try:
            return shutil.disk_usage(candidate).free
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return None


def full_disk_behind(exc: BaseException, folder: Path | None) -> bool:
    """True when `exc`, or an error it came from, is a full disk: SQLITE_FULL, ENOSPC, or an I/O
    error while the filesystem of `folder` (the data folder) has (nearly) no space left."""
    causes = list(_causes(exc))
    if any(is_disk_full(e) for e in causes):
        return True
    if folder is None or not any(_is_io_error(e) for e in causes):
        return False
    free = free_bytes(folder)
    return free is not None and free < NEARLY_FULL_BYTES


def disk_full_sentence(folder: Path | None) -> str:
    where = f" that holds {folder}" if folder is not None else ""
    return f"the disk{where} is full, so the history could not be used; free some space and try again (nothing was changed)"


def write_failure(exc: BaseException) -> str:
    """Why the history could not be written, in words."""
    if is_disk_full(exc):
        return "the disk is full"
    return f"the history file could not be written ({exc})"


class ReplyNotSaved(Exception):
    """The reply's final text could not be written; str(exc) says what the file keeps."""

    def __init__(self, cause: BaseException, *, saved_chars: int, total_chars: int) -> None:
        self.cause = cause
        self.saved_chars = saved_chars
        self.total_chars = total_chars
        super().__init__(reply_not_saved_sentence(cause, saved_chars=saved_chars, total_chars=total_chars))


def reply_not_saved_sentence(cause: BaseException, *, saved_chars: int, total_chars: int) -> str:
    if saved_chars <= 0:
        kept = "your message is saved, the reply is not"
    elif saved_chars >= total_chars:
        kept = f"your message and the reply's {saved_chars} characters are saved, but not its final state"
    else:
        kept = f"your message and the first {saved_chars} of the reply's {total_chars} characters are saved"
    return f"{write_failure(cause)}: {kept}"
