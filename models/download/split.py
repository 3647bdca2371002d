"""Split GGUF names (`name-00001-of-00003.gguf`): llama.cpp finds parts 2..N beside part 1 by name.

Disk-format invariant: the parts of one model keep these exact names in one folder, so
Cove never renames a part; a set that cannot keep its names goes into its own folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitName:
    stem: str  # "model-Q4_K_M" of "model-Q4_K_M-00001-of-00003.gguf"
    index: int  # 1-based
    count: int


def split_name(filename: str) -> SplitName | None:
    """The split parts of a file name (any folder part ignored), or None for a whole-file model."""
    m = _SPLIT.match(PurePath(filename).name)
    if not m or not 1 <= int(m["index"]) <= int(m["count"]) or int(m["count"]) < 2:
        return None
    return SplitName(m["stem"], int(m["index"]), int(m["count"]))


def part_names(filename: str) -> list[str]:
    """Every part's file name (same folder as `filename`), part 1 first; [filename] if not split."""
    info = split_name(filename)
    if info is None:
        return [filename]
    path = PurePath(filename)
    digits = len(_SPLIT.match(path.name)["index"])  # type: ignore[index]
    return [str(path.with_name(f"{info.stem}-{i:0{digits}d}-of-{info.count:0{digits}d}.gguf")) for i in range(1, info.count + 1)]
