"""What a collection holds: the files inside its folders, as the person gave them, and nothing under a
hidden or tool folder there. `Roots.place` answers where a resolved path (a link's target) sits in the
collection, or why it is not held; the walk and the watcher share it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Folders no person's documents live in (tools' caches and checkouts' internals).
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".mypy_cache"})


def is_left_out_name(name: str) -> bool:
    """A hidden file or folder, or a tool's folder: never walked into, never reached through a link."""
    return name.startswith(".") or name in SKIPPED_DIRS


@dataclass(frozen=True)
class Place:
    """Where a resolved path sits: `path`, the same file under a root as the person gave it, when the
    collection holds it; otherwise `hidden`, the hidden or tool folder (or file) it passes through
    inside a root, or neither: it is outside every root."""

    path: Path | None = None
    hidden: str | None = None


class Roots:
    """A collection's roots as given and as they resolve (a root that is itself a link was named by
    the person, so where it leads is inside)."""

    def __init__(self, roots: Iterable[str | Path]) -> None:
        self.given = tuple(Path(r) for r in roots)
        self.real = tuple(os.path.realpath(r) for r in self.given)

    def place(self, real: str) -> Place:
        """Where the fully resolved path `real` sits: the first root that holds it wins; a root that
        holds it only through a hidden or tool folder gives `hidden`."""
        hidden: str | None = None
        for given, root in zip(self.given, self.real, strict=True):
            if real == root:
                return Place(path=given)
            prefix = root if root.endswith(os.sep) else root + os.sep
            if not real.startswith(prefix):
                continue
            parts = real[len(prefix) :].split(os.sep)
            left_out = next((p for p in parts if is_left_out_name(p)), None)
            if left_out is None:
                return Place(path=given.joinpath(*parts))
            hidden = hidden or left_out
        return Place(hidden=hidden)

    def holds(self, path: str | Path) -> bool:
        """Whether the walk would find `path` where it is: its folder, resolved, inside a root and not
        under a hidden or tool folder, and its own name not hidden (the file need not exist)."""
        p = Path(path)
        return self.place(os.path.join(os.path.realpath(p.parent), p.name)).path is not None
