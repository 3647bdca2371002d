"""Disk-space preflight: refuse a download that cannot fit before fetching a byte of it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from models.units import format_size

MARGIN = 1.05  # room for the filesystem's own overhead and anything else writing meanwhile


def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (the folder may not be created yet)."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    return int(shutil.disk_usage(_existing(path)).free)


def check_disk_space(partial_dir: Path, models_dir: Path, remaining: int, total: int) -> str | None:
    """None if it fits, else the sentence to show ("... needs 4.1 GB, 2.0 GB free ...").

    `remaining` bytes still have to land in `partial_dir`; when `models_dir` is on another
    filesystem the finished files (`total` bytes) are copied there too, so it needs room
    for all of them as well. Both with a 5 % margin.
    """
    checks = [(Path(partial_dir), remaining)]
    same_disk = os.stat(_existing(partial_dir)).st_dev == os.stat(_existing(models_dir)).st_dev
    if not same_disk:
        checks.append((Path(models_dir), total))
    for folder, size in checks:
        need = int(size * MARGIN)
        free = free_bytes(folder)
        if need > free:
            return (
                f"Not enough disk space: the download needs {format_size(need)}, "
                f"{format_size(free)} free in {_existing(folder)}. Free some space and try again."
            )
    return None
