"""A file's path as the document index keeps it: `path` is text that can be stored and printed
(bytes of the name that are not UTF-8 shown as \\xNN escapes), and `raw_path` keeps the name's
exact bytes when that text is not the name itself, so such a file is found, read and told apart
from every other."""

from __future__ import annotations

import os
import re

# What SQLite and UTF-8 cannot hold: lone surrogates, as os.fsdecode leaves bytes that are not
# UTF-8 (surrogateescape) and as Windows names may hold them.
_ESCAPED = re.compile("[\ud800-\udfff]")


def shown_path(path: str) -> str:
    """`path` (as the OS gave it, str) as text for the index, the window and the terminal."""
    if not _ESCAPED.search(path):
        return path
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def raw_path(path: str) -> bytes | None:
    """The exact bytes of `path` when its shown form is not the path itself, else None."""
    return os.fsencode(path) if _ESCAPED.search(path) else None


def os_path(shown: str, raw: bytes | None) -> str:
    """The path as the OS takes it, from the index's `path` and `raw_path`."""
    return os.fsdecode(raw) if raw is not None else shown
