"""What an engine process really holds in memory: its own private pages, and how much of the model file is mapped in.

The figure set beside `models.memory_estimate` (estimate before loading, measured after).

`private` is the memory only this process can hold: dirty private pages (heap, anonymous
buffers such as the KV cache and compute buffers, stacks, written data of libraries) and
swapped-out pages; `mapped_model` is the resident part of the model file's mapping. Their sum
is what loading the model costs the machine. Where psutil cannot break a process down by
mapping (macOS, Windows, or no permission), `private` falls back to USS minus the model
file's private pages, or to USS. Why not plain USS: docs/decisions/memory-estimates.md, "What is measured".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MeasuredMemory:
    private: int  # bytes only this process holds (see the module docstring)
    mapped_model: int  # bytes of the model file resident in this process's mappings

    @property
    def total(self) -> int:
        return self.private + self.mapped_model


def measure_engine_memory(pid: int, model_path: str | os.PathLike[str] | None) -> MeasuredMemory:
    """Measure process `pid`; `model_path` is the model file it has mapped (None: no model).

    Raises psutil.Error (NoSuchProcess, AccessDenied) when the process cannot be read.
    """
    import psutil

    proc = psutil.Process(pid)
    model = _real(model_path) if model_path is not None else None
    try:
        maps = proc.memory_maps(grouped=True)
    except (psutil.AccessDenied, NotImplementedError, AttributeError):
        maps = []
    mapped = model_private = dirty = swap = 0
    detailed = bool(maps) and hasattr(maps[0], "private_dirty")
    for m in maps:
        is_model = model is not None and m.path and _real(m.path) == model
        if is_model:
            mapped += int(m.rss)
            if detailed:
                model_private += int(m.private_clean) + int(m.private_dirty)
        elif detailed:
            dirty += int(m.private_dirty)
            swap += int(getattr(m, "swap", 0))
    if detailed:
        return MeasuredMemory(private=dirty + swap, mapped_model=mapped)
    uss = int(getattr(proc.memory_full_info(), "uss", 0) or proc.memory_info().rss)
    return MeasuredMemory(private=max(0, uss - model_private), mapped_model=mapped)


def _real(path: str | os.PathLike[str]) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return str(Path(path))
