"""The engine's slots: the sequences of the one llama.cpp context, each with its KV cells, the exact
tokens those cells hold, and the transcript of the conversation it served last; which slot a reply
takes (the free one whose tokens share the longest prefix with its prompt, else the least recently
used); and the batch of tokens one llama_decode evaluates for several slots at once.

Host-internal, main thread only. A slot's `input_ids[:n_tokens]` are exactly the tokens whose cells
sequence `seq` holds (positions 0..n_tokens-1), as llama-cpp-python keeps them for sequence 0.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from app.engine.host.transcript import STATELESS, Transcript, common_prefix
from app.engine.host.window_checkpoints import KEEP, Checkpoint

# The share of a prompt a slot's cells must hold for the reply to go to that slot rather than to
# the least recently used one (llama-server's --slot-prompt-similarity is 0.10).
SIMILAR = 0.5


class Slot:
    def __init__(self, llm: Any, seq: int, n_ctx: int) -> None:
        self.llm = llm
        self.seq = seq
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self.transcript: Transcript | None = None  # the conversation it served last, as generated
        self.last_used = 0.0
        self.busy = False
        self.checkpoints: list[Checkpoint] = []  # of its window cells (window_checkpoints.py), oldest first

    def tokens(self) -> np.ndarray:
        return self.input_ids[: self.n_tokens]

    def clear(self) -> None:
        """Forget every cell of this sequence (the others are untouched)."""
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.llm.ctx), self.seq, -1, -1)
        self.n_tokens = 0
        self.checkpoints.clear()

    def keep_checkpoint(self, checkpoint: Checkpoint) -> None:
        """A checkpoint of its first `checkpoint.n_tokens` tokens; the newest KEEP stay."""
        self.checkpoints = [c for c in self.checkpoints if c.n_tokens != checkpoint.n_tokens] + [checkpoint]
        del self.checkpoints[:-KEEP]

    def cut(self, n: int) -> bool:
        """Keep the first `n` cells only; False (and nothing kept) when llama.cpp cannot cut there."""
        if n >= self.n_tokens:
            return True
        if n > 0 and llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.llm.ctx), self.seq, n, -1):
            self.n_tokens = n
            self.checkpoints = [c for c in self.checkpoints if c.n_tokens <= n]
            return True
        self.clear()
        return n == 0

    def pos_min(self) -> int:
        return int(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(self.llm.ctx), self.seq))

    def evaluated(self, tokens: Sequence[int] | np.ndarray, start: int) -> None:
        """Bookkeeping after tokens were decoded into this sequence at positions start..."""
        end = start + len(tokens)
        self.input_ids[start:end] = tokens
        self.n_tokens = end


class Slots:
    def __init__(self, llm: Any, n_slots: int, n_ctx: int) -> None:
        self.all = [Slot(llm, seq, n_ctx) for seq in range(n_slots)]

    def __len__(self) -> int:
        return len(self.all)

    def free(self) -> list[Slot]:
        return [s for s in self.all if not s.busy]

    def transcript_for(self, conversation_id: str | None) -> Transcript | None:
        """The newest transcript a slot holds of this conversation (its reply tokens as generated;
        None: requests without one, such as API clients resending the whole conversation)."""
        key = STATELESS if conversation_id is None else conversation_id
        found = [s for s in self.all if s.transcript is not None and s.transcript.conversation_id == key]
        return max(found, key=lambda s: s.last_used).transcript if found else None

    def newest_transcript(self) -> Transcript | None:
        """The transcript of the slot used last (a prompt that starts with its text reuses its tokens)."""
        held = [s for s in self.all if s.transcript is not None]
        return max(held, key=lambda s: s.last_used).transcript if held else None

    def choose(self, prompt: Sequence[int]) -> Slot | None:
        """The free slot whose cells share the longest prefix with `prompt`, when that is at least
        SIMILAR of the prompt; otherwise the least recently used (a prefix shorter than that is a
        system prompt or a template's opening, not worth another conversation's cells)."""
        free = self.free()
        if not free:
            return None
        best = max(free, key=lambda s: (common_prefix(s.tokens(), prompt), s.last_used))
        if common_prefix(best.tokens(), prompt) >= SIMILAR * len(prompt):
            return best
        return min(free, key=lambda s: s.last_used)

    def take(self, slot: Slot) -> None:
        slot.busy = True
        slot.last_used = time.monotonic()

    def give_back(self, slot: Slot) -> None:
        slot.busy = False
        slot.last_used = time.monotonic()

    def clear_all(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.all[0].llm.ctx), True)
        for s in self.all:
            s.n_tokens = 0
            s.transcript = None
            s.checkpoints.clear()


class Batch:
    """A llama_batch for tokens of several sequences; add() returns the row of each token's logits."""

    def __init__(self, llm: Any, capacity: int, n_seq: int) -> None:
        self._llm = llm
        self.capacity = capacity
        self._batch = llama_cpp.llama_batch_init(capacity, 0, n_seq)
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    @property
    def room(self) -> int:
        return self.capacity - self.n

    def add(self, token: int, pos: int, seq: int, logits: bool) -> int:
        b, i = self._batch, self.n
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits
        self.n = i + 1
        return i

    def decode(self) -> None:
        self._batch.n_tokens = self.n
        code = llama_cpp.llama_decode(self._llm.ctx, self._batch)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
