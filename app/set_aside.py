"""Names for a damaged file moved aside (the history, the settings): `<name>.corrupt-<UTC
stamp>`, with `-2`, `-3`… when that name is taken, so no earlier copy is ever overwritten."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def aside_name(path: Path, stamp: str) -> Path:
    """The first free `<name>.corrupt-<stamp>[-N]` beside `path`."""
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    return target
