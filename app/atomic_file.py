"""Writing a file whole or not at all: a temporary file in the same folder (created 0600 by
mkstemp), flushed to disk, then renamed over the old one. Settings, the record's sealing state,
the machine's TLS key and certificate and the conversations' images are written this way. And a
lock on a file that several processes starting at once take in turn (`locked`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_bytes_whole(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (mode 0600); a crash leaves the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_whole(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8), as write_bytes_whole."""
    write_bytes_whole(path, text.encode("utf-8"))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (made if missing) while the block runs (POSIX; elsewhere none)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
