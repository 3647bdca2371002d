"""What a collection holds: the files inside its folders, as the person gave them, and nothing in a
folder its exclude patterns leave out (app/docs/patterns.py). `Roots.place` answers where a resolved
path (a link's target) sits in the collection, or why it is not held; the walk and the watcher share it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.docs.patterns import DEFAULT_PATTERNS, Patterns


@dataclass(frozen=True)
class Place:
    """Where a resolved path sits: `path`, the same file under a root as the person gave it, and
    `rel`, its path from that root with "/", when the collection holds it; otherwise `hidden`, the
    left-out folder (or file) it passes through inside a root, with the `pattern` that leaves it
    out, or neither: it is outside every root."""

    path: Path | None = None
    rel: str = ""
    hidden: str | None = None
    pattern: str | None = None


class Roots:
    """A collection's roots as given and as they resolve (a root that is itself a link was named by
    the person, so where it leads is inside), and the patterns that leave parts of them out."""

    def __init__(self, roots: Iterable[str | Path], patterns: Patterns = DEFAULT_PATTERNS) -> None:
        self.given = tuple(Path(r) for r in roots)
        self.real = tuple(os.path.realpath(r) for r in self.given)
        self.patterns = patterns

    def place(self, real: str) -> Place:
        """Where the fully resolved path `real` sits: the first root that holds it wins; a root that
        holds it only through a left-out folder gives `hidden`."""
        left: Place = Place()
        is_dir = os.path.isdir(real)
        for given, root in zip(self.given, self.real, strict=True):
            if real == root:
                return Place(path=given)
            prefix = root if root.endswith(os.sep) else root + os.sep
            if not real.startswith(prefix):
                continue
            parts = real[len(prefix) :].split(os.sep)
            hit = self.patterns.left_out_by(parts, is_dir)
            if hit is None:
                return Place(path=given.joinpath(*parts), rel="/".join(parts))
            if left.hidden is None:
                left = Place(hidden=parts[hit[0]], pattern=hit[1])
        return left

    def holds(self, path: str | Path) -> bool:
        """Whether the walk would find `path` where it is: its folder, resolved, inside a root and
        not in a left-out folder, its own name not left out, and, a file (a name with a suffix), one
        the include patterns keep (the file need not exist)."""
        p = Path(path)
        place = self.place(os.path.join(os.path.realpath(p.parent), p.name))
        if place.path is None:
            return False
        return not place.rel or not p.suffix or os.path.isdir(p) or self.patterns.included(place.rel)
