"""Start-up tidying of what interrupted downloads leave behind.

Deleted: a `.part` without a valid sidecar, a sidecar without its `.part`, half-written
sidecars, huggingface_hub `*.incomplete` files under Cove's own folders, and interrupted
cross-disk copies (`*.cove-incoming`) in the models folders. Kept, and reported as
resumable: every `.part` with a valid sidecar. Files a running download holds locked
(another Cove process) are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.download import partial
from models.download.place import INCOMING_SUFFIX


@dataclass(frozen=True)
class CleanupReport:
    removed: tuple[str, ...]  # paths deleted
    freed: int  # bytes
    resumable: tuple[partial.ResumableDownload, ...]


def cleanup_orphans(partial_dir: Path, cove_dirs: Iterable[Path] = (), models_dirs: Iterable[Path] = ()) -> CleanupReport:
    """Delete the leftovers described above. Call when this process runs no download."""
    partial_dir = Path(partial_dir)
    doomed: list[Path] = []
    if partial_dir.is_dir():
        for path in sorted(partial_dir.iterdir()):
            if not path.is_file():
                continue
            name = path.name
            if name.endswith(partial.PART_SUFFIX):
                sha = name[: -len(partial.PART_SUFFIX)]
                if partial.read_record(partial_dir, sha) is None:
                    doomed.append(path)
            elif name.endswith(partial.SIDECAR_SUFFIX):
                sha = name[: -len(partial.SIDECAR_SUFFIX)]
                if not partial.part_path(partial_dir, sha).exists() or partial.read_record(partial_dir, sha) is None:
                    doomed.append(path)
            else:
                doomed.append(path)  # e.g. a sidecar's .tmp from a write that never finished
    for folder in cove_dirs:
        if Path(folder).is_dir():
            doomed.extend(p for p in Path(folder).rglob("*.incomplete") if p.is_file())
    for folder in models_dirs:
        folder = Path(folder)
        if folder.is_dir():
            doomed.extend(p for p in (*folder.glob(f"*{INCOMING_SUFFIX}"), *folder.glob(f"*/*{INCOMING_SUFFIX}")) if p.is_file())

    removed, freed = [], 0
    for path in dict.fromkeys(doomed):  # unique, in order
        if partial.in_use(path) or partial.in_use(_part_of(path)):
            continue
        try:
            size = path.stat().st_size
            path.unlink()
        except OSError:
            continue  # gone already, or not ours to delete after all
        removed.append(str(path))
        freed += size
    return CleanupReport(tuple(removed), freed, tuple(partial.resumable(partial_dir)))


def _part_of(path: Path) -> Path:
    """For a sidecar, its `.part` (whose lock says whether a download is running)."""
    if path.name.endswith(partial.SIDECAR_SUFFIX):
        return path.with_name(path.name[: -len(partial.SIDECAR_SUFFIX)] + partial.PART_SUFFIX)
    return path
