"""Writing a small text file whole or not at all: a temporary file in the same folder (created
0600 by mkstemp), flushed to disk, then renamed over the old one. Settings and the record's
sealing state are written this way."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_whole(path: Path, text: str) -> None:
    """Replace `path` with `text`; a crash leaves the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
