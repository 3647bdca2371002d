"""Checkpoints of a slot's sliding-window cells, so that a reply may go back into a conversation that
has grown past the model's window without reading it all again (llama-server's context checkpoints).

The engine keeps only the last `n_swa` positions (plus a batch) in a sliding-window model's window
layers (Gemma 3: 512), as llama-server does by default; the full-size window cache would cost every
slot the whole context again in those layers. Once older positions have left that cache, cutting the
cells back to an earlier token would leave its window without the positions before it. A checkpoint
is the window cache of one sequence as it was when the slot held its first `n_tokens` tokens
(llama_state_seq_get_data_ext with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the window layers' cells
only); loading it and cutting the full-attention layers back to `n_tokens` gives exactly the cells
those tokens made.

A reply's prompt takes one (`point`), just before the batch that starts there is decoded: where its
new tokens begin, so that an edited last message goes back there, and a reply asked again reads that
message again; in a new conversation (no tokens kept), TAIL tokens before the prompt's end. A slot
keeps the newest only: a checkpoint can be as large as the window layers' whole cache (15 MiB on the
starter, about 600 MiB on a 27B Gemma 3), and the memory estimate counts one per slot.

Host-internal, main thread only.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

PARTIAL = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
# The prompt's last tokens read again after going back to its tail checkpoint (llama-server: 4).
TAIL = 4
KEEP = 1


@dataclass
class Checkpoint:
    n_tokens: int  # the window cells are those of the slot's first n_tokens tokens
    data: np.ndarray

    @property
    def size(self) -> int:
        return int(self.data.nbytes)


def point(cached: int, n_prompt: int) -> int | None:
    """Where a prompt of `n_prompt` tokens, whose first `cached` are already in the cells, takes its
    checkpoint: at its first new token, or TAIL tokens before its end when nothing was kept (None:
    going back to nothing needs no checkpoint)."""
    at = cached if cached > 0 else n_prompt - TAIL
    return at if 0 < at < n_prompt else None


def take(ctx: Any, seq: int, n_tokens: int) -> Checkpoint | None:
    """The window cells sequence `seq` holds now, which are those of its first `n_tokens` tokens."""
    size = int(llama_cpp.llama_state_seq_get_size_ext(ctx, seq, PARTIAL))
    if size <= 0:
        return None
    data = np.empty(size, dtype=np.uint8)  # llama.cpp writes every byte
    if llama_cpp.llama_state_seq_get_data_ext(ctx, _pointer(data), size, seq, PARTIAL) != size:
        return None
    return Checkpoint(n_tokens, data)


def load(ctx: Any, seq: int, checkpoint: Checkpoint) -> bool:
    """The checkpoint's window cells into sequence `seq` (its own are dropped first); False when
    llama.cpp refused them (the sequence's cells are then in no known state)."""
    size = checkpoint.size
    return int(llama_cpp.llama_state_seq_set_data_ext(ctx, _pointer(checkpoint.data), size, seq, PARTIAL)) == size


def newest_within(checkpoints: list[Checkpoint], n: int) -> Checkpoint | None:
    """The checkpoint of the most tokens, at most `n`."""
    found = [c for c in checkpoints if c.n_tokens <= n]
    return max(found, key=lambda c: c.n_tokens) if found else None


def _pointer(data: np.ndarray) -> Any:
    return data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
