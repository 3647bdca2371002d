"""One sentence for any failure, shared by the command line and the window (never a traceback)."""

from __future__ import annotations

import sqlite3


def describe_error(exc: BaseException) -> str:
    """One sentence for the person; our own exceptions already carry one."""
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
