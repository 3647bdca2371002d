"""What binds a saved KV state (app/engine/host/state_cache.py, state_files.py) to the tokens it claims
to hold, checked when a state file is restored.

A state file's checksums only say that the file is the one that was written; anyone who can write
to the state folder can also write a file whose checksums match (another conversation's cells under
this one's tokens, NaNs in the cells, cells at the wrong positions). Two checks bind the cells to the
tokens:

- `cells_in_place`, before the bytes reach llama.cpp: the data holds, at the offsets found when the
  state was saved, each KV cache's cell list with positions 0..n-1 of sequence 0 and nothing else
  (llama.cpp writes a cell as its position, its sequence count and its sequence ids: 12 bytes).
  Where the build writes cells in another shape none are found at saving, and the checks after the
  restore stand alone.
- `Fingerprint`: when the state is saved, it is restored into its own slot and the last token is
  evaluated again over the other cells; a few of the logits that gives are kept (the 16 highest and
  48 spread over the vocabulary). After a restore the same evaluation must give finite logits equal
  to those within a small tolerance. Taking them from restored cells, not the live ones, matters:
  a restore packs the cells from the cache's start, and a sliding-window cache that has wrapped
  around sums its attention in another order (Gemma 3's logits moved by 1.6% of their range).
  Cells of another text, NaNs or cells of another model give other logits; llama.cpp's own refusal
  (a decode error) counts as a mismatch too.

What this does not stop: someone who runs the same model to compute the logits of cells they made
up, and writes those as the fingerprint. That needs a key the attacker cannot read, which Cove
does not keep.

No llama.cpp calls here: state_cache.py evaluates, this module compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

TOP = 16  # the highest logits kept
SPREAD = 48  # and this many more at evenly spaced token ids
# Two evaluations of the same cells differ only by the order of float sums: far below this share
# of the logits' range. Other cells move the logits by a sizeable part of it.
TOLERANCE = 1e-3
CELL = np.dtype([("pos", "<i4"), ("n_seq", "<u4"), ("seq", "<i4")])


@dataclass(frozen=True)
class Fingerprint:
    ids: tuple[int, ...]  # token ids
    logits: tuple[float, ...]  # the logits of those ids after the last token
    cells: tuple[int, ...]  # byte offsets in the data of each KV cache's cell list (may be empty)

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "logits": list(self.logits), "cells": list(self.cells)}

    @classmethod
    def from_json(cls, value: Any) -> Fingerprint | None:
        """None when `value` is not what to_json makes."""
        if not isinstance(value, dict):
            return None
        ids, logits, cells = value.get("ids"), value.get("logits"), value.get("cells")
        if not (isinstance(ids, list) and isinstance(logits, list) and isinstance(cells, list)):
            return None
        if not ids or len(ids) != len(logits) or len(ids) > TOP + SPREAD:
            return None
        if not all(type(i) is int and 0 <= i < 2**31 for i in ids + cells):
            return None
        if not all(type(v) is float and math.isfinite(v) for v in logits):
            return None
        return cls(tuple(ids), tuple(logits), tuple(cells))


def _cell_list(n: int) -> bytes:
    cells = np.zeros(n, dtype=CELL)
    cells["pos"] = np.arange(n)
    cells["n_seq"] = 1
    return cells.tobytes()


def find_cells(data: np.ndarray, n: int) -> tuple[int, ...]:
    """The offsets in `data` (a freshly saved state of n cells) where a cell list 0..n-1 starts,
    each preceded by its cell count."""
    raw, want = data.tobytes(), n.to_bytes(4, "little") + _cell_list(n)
    found: list[int] = []
    at = raw.find(want)
    while at >= 0 and len(found) < 8:
        found.append(at + 4)
        at = raw.find(want, at + len(want))
    return tuple(found)


def cells_in_place(data: np.ndarray, n: int, offsets: tuple[int, ...]) -> bool:
    want = np.frombuffer(n.to_bytes(4, "little") + _cell_list(n), dtype=np.uint8)
    for at in offsets:
        if at < 4 or at - 4 + len(want) > data.nbytes or not np.array_equal(data[at - 4 : at - 4 + len(want)], want):
            return False
    return True


def take(tokens: np.ndarray, logits: np.ndarray, data: np.ndarray) -> Fingerprint | None:
    """The fingerprint of a state whose last token's logits are `logits`; None when they are not
    finite (such a state is not worth keeping)."""
    if not np.isfinite(logits).all():
        return None
    n_vocab = len(logits)
    top = np.argpartition(logits, -TOP)[-TOP:] if n_vocab > TOP else np.arange(n_vocab)
    spread = np.linspace(0, n_vocab - 1, min(SPREAD, n_vocab)).astype(np.int64)
    ids = tuple(dict.fromkeys(int(i) for i in (*sorted(top.tolist()), *spread.tolist())))
    return Fingerprint(ids, tuple(float(logits[i]) for i in ids), find_cells(data, len(tokens)))


def mismatch(fingerprint: Fingerprint, logits: np.ndarray) -> str | None:
    """Why `logits` (after a restore) are not those of the fingerprint, or None when they are."""
    if not np.isfinite(logits).all():
        return "its cells give non-finite logits"
    if max(fingerprint.ids) >= len(logits):
        return "its fingerprint names tokens this model does not have"
    stored = np.array(fingerprint.logits, dtype=np.float64)
    got = logits[list(fingerprint.ids)].astype(np.float64)
    scale = max(float(stored.max() - stored.min()), 1e-6)
    if float(np.abs(got - stored).max()) > TOLERANCE * scale:
        return "its cells do not give the logits saved with it"
    return None
