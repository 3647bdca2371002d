"""What a failed write of the history means for the person: the sentence for a reply that
could not be saved (the disk is full, the file is locked), saying exactly what was kept."""

from __future__ import annotations

import sqlite3

_SQLITE_FULL = 13


def is_disk_full(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.Error):
        return isinstance(exc, OSError) and exc.errno == 28  # ENOSPC
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) == _SQLITE_FULL:
        return True
    return "disk is full" in str(exc).lower()


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
