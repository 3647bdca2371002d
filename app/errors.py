"""One sentence for any failure, shared by the command line and the window (never a traceback).

A failure of the history that comes from a full disk says so, whatever SQLite called it
(app/store/save_errors.py `full_disk_behind`); text that is not valid in its encoding (a
non-UTF-8 argument) is shown with U+FFFD, never as a codec's message."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.store.database import DatabaseError
from app.store.save_errors import disk_full_sentence, full_disk_behind
from app.unreadable_text import from_os


def describe_error(exc: BaseException, data_dir: Path | None = None) -> str:
    """One sentence for the person; our own exceptions already carry one. `data_dir`: the data
    folder, whose free space tells a full disk behind SQLite's "disk I/O error" (the default
    one when not given)."""
    if isinstance(exc, (sqlite3.Error, DatabaseError, OSError)):
        folder = data_dir if data_dir is not None else _default_data_dir()
        if full_disk_behind(exc, folder):
            return disk_full_sentence(folder)
    if isinstance(exc, UnicodeEncodeError) and isinstance(exc.object, str):
        return _not_text(exc)
    if isinstance(exc, sqlite3.OperationalError):
        return f"the history database could not be used ({exc}); nothing was changed"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, FileNotFoundError):
        return f"no such file: {exc.filename or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _not_text(exc: UnicodeEncodeError) -> str:
    """A text with bytes that are not valid in its encoding (an argument, a file name), shown
    with U+FFFD in their place; or valid text an output's encoding cannot hold."""
    if not any("\ud800" <= ch <= "\udfff" for ch in exc.object[exc.start : exc.end]):
        return f"some of the text cannot be written in {exc.encoding}; a UTF-8 locale (such as C.UTF-8) shows all of it"
    shown = from_os(exc.object)[0]
    if len(shown) > 80:
        shown = shown[:77] + "…"
    return f"“{shown}” is not valid text ({exc.encoding} cannot hold part of it), so Cove could not use it"


def _default_data_dir() -> Path | None:
    try:
        from app.paths import resolve_paths

        return resolve_paths().data_dir
    except Exception:  # noqa: BLE001 - no folder known: an I/O error is then not taken for a full disk
        return None
