"""Partial downloads on disk: `<sha256>.part` (the bytes so far) beside `<sha256>.json` (what they are).

Disk-format invariant: a `.part` file holds a prefix of the Hub file whose LFS sha256 is
its name, and is only ever appended to (opened without truncating); its sidecar says
which repo, file and commit that is, and how big the whole file is. A `.part` without a
valid sidecar is an orphan (cleanup deletes it); one with a valid sidecar is resumable.
While a download writes to a `.part` it holds an exclusive lock on it (POSIX flock), so
another Cove process neither deletes nor resumes it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

SIDECAR_VERSION = 1
PART_SUFFIX = ".part"
SIDECAR_SUFFIX = ".json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def is_sha256(text: str | None) -> bool:
    return bool(text and _SHA256.match(text))


@dataclass(frozen=True)
class PartialRecord:
    repo: str
    filename: str  # path inside the repo
    commit: str  # every file of one download comes from this commit
    size: int  # of the whole file
    sha256: str  # the Hub's LFS hash; also the partial's file name
    group: tuple[str, ...]  # every file of the download it belongs to, in order (split parts)
    started_at: str


@dataclass(frozen=True)
class ResumableDownload:
    """A download left by an earlier run: what it is and how far it got."""

    repo: str
    commit: str
    filenames: tuple[str, ...]
    bytes_done: int
    total: int  # of the files with a partial on disk


def part_path(folder: Path, sha256: str) -> Path:
    return Path(folder) / f"{sha256}{PART_SUFFIX}"


def sidecar_path(folder: Path, sha256: str) -> Path:
    return Path(folder) / f"{sha256}{SIDECAR_SUFFIX}"


def new_record(repo: str, filename: str, commit: str, size: int, sha256: str, group: tuple[str, ...]) -> PartialRecord:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return PartialRecord(repo, filename, commit, size, sha256, tuple(group), now)


def write_record(folder: Path, record: PartialRecord) -> None:
    """Write the sidecar atomically and durably (temp file, fsync, rename, fsync the folder)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = sidecar_path(folder, record.sha256)
    tmp = final.with_name(final.name + ".tmp")
    data = json.dumps({"version": SIDECAR_VERSION, **asdict(record)}, indent=1).encode()
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    _fsync_dir(folder)


def read_record(folder: Path, sha256: str) -> PartialRecord | None:
    """The sidecar of `sha256`, or None when it is missing or not a valid record of that hash."""
    try:
        data = json.loads(sidecar_path(folder, sha256).read_text("utf-8"))
        record = PartialRecord(
            repo=str(data["repo"]),
            filename=str(data["filename"]),
            commit=str(data["commit"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            group=tuple(str(f) for f in data["group"]),
            started_at=str(data.get("started_at", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    valid = (
        data.get("version") == SIDECAR_VERSION
        and record.sha256 == sha256
        and is_sha256(sha256)
        and record.size >= 0
        and record.filename in record.group
        and record.repo
        and record.commit
    )
    return record if valid else None


def open_partial(folder: Path, sha256: str) -> BinaryIO:
    """The `.part` file for reading and appending; created empty if missing, never truncated."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    fd = os.open(part_path(folder, sha256), os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    return os.fdopen(fd, "r+b", buffering=0)


def try_lock(f: BinaryIO) -> bool:
    """Take the exclusive "a download is writing this" lock; False if another holder has it."""
    if sys.platform == "win32":
        return True  # Windows already refuses to delete a file that is open
    import fcntl

    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def in_use(path: Path) -> bool:
    """Whether a running download (in any process) holds the lock on `path`."""
    if sys.platform == "win32" or not path.exists():
        return False
    try:
        with open(path, "rb") as f:
            return not try_lock(f)  # closing the file releases our own lock at once
    except OSError:
        return False


def remove_partial(folder: Path, sha256: str) -> None:
    """Delete the `.part` and its sidecar (the sidecar last: a `.part` alone is an orphan)."""
    part_path(folder, sha256).unlink(missing_ok=True)
    sidecar_path(folder, sha256).unlink(missing_ok=True)


def discard(folder: Path, repo: str, filenames: tuple[str, ...]) -> None:
    """Delete every partial file (with its sidecar) of these repo files that no download holds."""
    for record in records(folder):
        if record.repo == repo and record.filename in filenames and not in_use(part_path(folder, record.sha256)):
            remove_partial(folder, record.sha256)


def partial_size(folder: Path, sha256: str) -> int:
    try:
        return part_path(folder, sha256).stat().st_size
    except OSError:
        return 0


def records(folder: Path) -> list[PartialRecord]:
    """Every valid sidecar whose `.part` exists."""
    found: list[PartialRecord] = []
    folder = Path(folder)
    if not folder.is_dir():
        return found
    for side in sorted(folder.glob(f"*{SIDECAR_SUFFIX}")):
        sha = side.name[: -len(SIDECAR_SUFFIX)]
        record = read_record(folder, sha)
        if record is not None and part_path(folder, sha).exists():
            found.append(record)
    return found


def resumable(folder: Path) -> list[ResumableDownload]:
    """Downloads an earlier run left behind (not ones running now), grouped as they were started."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[PartialRecord]] = {}
    for record in records(folder):
        if in_use(part_path(folder, record.sha256)):
            continue
        groups.setdefault((record.repo, record.commit, record.group), []).append(record)
    return [
        ResumableDownload(
            repo=repo,
            commit=commit,
            filenames=group,
            bytes_done=sum(min(partial_size(folder, r.sha256), r.size) for r in recs),
            total=sum(r.size for r in recs),
        )
        for (repo, commit, group), recs in groups.items()
    ]


def _fsync_dir(folder: Path) -> None:
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
