"""Names for a damaged file moved aside (the history, the document index, the settings):
`<name>.corrupt-<UTC stamp>`, with `-2`, `-3`… when that name is taken, so no earlier copy is ever
overwritten; and moving a damaged SQLite file aside with its sidecars."""

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


SQLITE_SIDECARS = ("-wal", "-shm")


def move_database_aside(path: Path) -> Path:
    """Rename a damaged SQLite file and its sidecars (a WAL belongs to the file whose name it
    extends, so they move together) to the first free `<name>.corrupt-<stamp>`; never delete.
    Raises OSError when it cannot."""
    target = aside_name(path, utc_stamp())
    for suffix in SQLITE_SIDECARS:
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            sidecar.replace(target.with_name(target.name + suffix))
    path.replace(target)
    return target
