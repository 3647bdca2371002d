"""A RAM cache of earlier conversations' KV state in the engine host (llama-server's --cache-ram):
the state of a slot's sequence is saved after a reply, with the exact tokens it holds, and restored before
a reply whose prompt shares a longer prefix with it than with the slot's live cells (into whichever slot
the reply took). StateKeeper also
hands each saved state to the disk tier (app/engine/host/state_files.py) and, for a conversation the RAM
cache does not hold, restores the conversation's file instead. A file's cells are checked against
the tokens it claims (app/engine/host/state_check.py) before and after they are restored; a file that
fails, or whose restore is followed by a failed decode, is deleted and the prompt evaluated from the
start, and the reply's metrics say so (`state_cache.discarded`).

Bounded by bytes and by entries, least recently used out first. Host-internal: one cache per
ModelSession, used on the host's main thread only. Saving happens after the reply's Finished has
been sent, so it costs that reply nothing; a restore happens before the prompt is evaluated and is
counted in the reply's prepare time.
"""

from __future__ import annotations

import ctypes
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

from app.engine.host.slots import Slot
from app.engine.host.state_check import Fingerprint, cells_in_place, mismatch, take
from app.engine.host.state_files import DiskState, StateFiles
from app.engine.host.transcript import Transcript, common_prefix

MAX_ENTRIES = 16
# A restore copies the whole saved state back and saves prefilling `gain` tokens. Copying one
# token's KV cells is two orders of magnitude cheaper than evaluating it (docs/decisions/kv-state.md,
# "In RAM"), so a restore is worth it once it saves MIN_GAIN tokens
# and at least 1/GAIN_RATIO of what it copies.
MIN_GAIN = 8
GAIN_RATIO = 32


@dataclass(eq=False)  # compared by identity (it holds arrays)
class SavedState:
    tokens: np.ndarray  # the tokens whose KV cells the state holds, positions 0..n-1
    data: np.ndarray  # llama_state_seq_get_data of sequence 0 (uint8)
    transcript: Transcript | None  # the conversation's transcript when it was saved (exact reply tokens)
    check: Fingerprint | None = None  # what binds `data` to `tokens` (written with the state's file)

    @property
    def size(self) -> int:
        return int(self.data.nbytes)

    def pointer(self) -> Any:
        return self.data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


class StateCache:
    """The saved states, least recently used first. Pure bookkeeping (no llama.cpp calls)."""

    def __init__(self, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self._entries: OrderedDict[int, SavedState] = OrderedDict()
        self._next = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def states(self) -> list[SavedState]:
        """Least recently used first."""
        return list(self._entries.values())

    def best(self, prompt: Sequence[int]) -> tuple[SavedState | None, int]:
        """The saved state sharing the longest token prefix with `prompt`, and that length."""
        found: SavedState | None = None
        longest = 0
        for state in self._entries.values():
            n = common_prefix(state.tokens, prompt)
            if n > longest:
                found, longest = state, n
        return found, longest

    def transcript_for(self, conversation_id: str | None) -> Transcript | None:
        """The newest saved transcript of a conversation (its reply tokens exactly as generated)."""
        if conversation_id is None:
            return None
        for state in reversed(self._entries.values()):
            if state.transcript is not None and state.transcript.conversation_id == conversation_id:
                return state.transcript
        return None

    def touch(self, state: SavedState) -> None:
        for key, value in self._entries.items():
            if value is state:
                self._entries.move_to_end(key)
                return

    def covered(self, tokens: np.ndarray) -> SavedState | None:
        """A saved state that starts with all of `tokens` (saving them again would add nothing)."""
        for state in self._entries.values():
            if len(state.tokens) >= len(tokens) and _starts_with(state.tokens, tokens):
                return state
        return None

    def add(self, state: SavedState) -> bool:
        """Keep `state`, dropping the states it extends and then the least recently used until it
        fits; False (nothing kept) when it is larger than the whole cache."""
        if state.size > self.max_bytes or self.max_entries <= 0:
            return False
        n = len(state.tokens)
        for key, old in list(self._entries.items()):
            # A prompt shares at least as long a prefix with a state as with any prefix of it.
            if len(old.tokens) <= n and _starts_with(state.tokens, old.tokens):
                self._drop(key)
        while self._entries and (self.bytes + state.size > self.max_bytes or len(self._entries) >= self.max_entries):
            self._drop(next(iter(self._entries)))
        self._entries[self._next] = state
        self._next += 1
        self.bytes += state.size
        return True

    def remove(self, state: SavedState) -> None:
        for key, value in self._entries.items():
            if value is state:
                self._drop(key)
                return

    def _drop(self, key: int) -> None:
        self.bytes -= self._entries.pop(key).size


def _starts_with(tokens: np.ndarray, prefix: np.ndarray) -> bool:
    n = len(prefix)
    return len(tokens) >= n and bool(np.array_equal(tokens[:n], prefix))


def worth_restoring(gain: int, state_tokens: int) -> bool:
    return gain >= MIN_GAIN and gain * GAIN_RATIO >= state_tokens


def last_logits(llm: Any, tokens: np.ndarray, seq: int = 0) -> np.ndarray:
    """Evaluate tokens[-1] again at its position over the cells before it and return its logits (a
    copy): the fingerprint's evaluation (state_check.py). The context must hold exactly `tokens` in
    sequence `seq`; it does again afterwards. RuntimeError when llama.cpp refuses the batch."""
    n = len(tokens)
    mem = llama_cpp.llama_get_memory(llm.ctx)
    if not llama_cpp.llama_memory_seq_rm(mem, seq, n - 1, -1):
        raise RuntimeError("the last cell could not be removed")
    batch = llama_cpp.llama_batch_init(1, 0, 1)
    try:
        batch.n_tokens = 1
        batch.token[0] = int(tokens[-1])
        batch.pos[0] = n - 1
        batch.n_seq_id[0] = 1
        batch.seq_id[0][0] = seq
        batch.logits[0] = True
        code = llama_cpp.llama_decode(llm.ctx, batch)
    finally:
        llama_cpp.llama_batch_free(batch)
    if code != 0:
        raise RuntimeError(f"llama_decode returned {code}")
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    if not ptr:
        raise RuntimeError("llama.cpp gave no logits")
    n_vocab = int(llm.n_vocab())
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,)).copy()


def verify_restored(llm: Any, tokens: np.ndarray, check: Fingerprint, seq: int = 0) -> str | None:
    """After llama_state_seq_set_data of a state claiming `tokens`: None when its cells are those
    tokens' by every check, else why not (the caller then clears the context)."""
    n = len(tokens)
    mem = llama_cpp.llama_get_memory(llm.ctx)
    # A sliding-window cache comes back with the window's cells only (Gemma 3: the last 512), and
    # llama.cpp gives the lowest position over both caches.
    n_swa = int(llama_cpp.llama_model_n_swa(llm.model))
    lowest = max(0, n - n_swa) if n_swa > 0 else 0
    pos_min, pos_max = llama_cpp.llama_memory_seq_pos_min(mem, seq), llama_cpp.llama_memory_seq_pos_max(mem, seq)
    if not 0 <= pos_min <= lowest or pos_max != n - 1:
        return "its cells are not at positions 0 to n-1"
    try:
        logits = last_logits(llm, tokens, seq)
    except RuntimeError as exc:
        return f"llama.cpp refused its cells ({exc})"
    return mismatch(check, logits)


class StateKeeper:
    """Saves and restores the slots' sequences of one llama_cpp.Llama, in RAM and (with `files`) on
    disk, and says what it did for the metrics. One cache for every slot: a state saved from one
    slot restores into any other."""

    def __init__(
        self, llm: Any, max_bytes: int, *, enabled: bool, files: StateFiles | None = None, n_ctx: int | None = None, window: int = 0
    ) -> None:
        self._llm = llm
        self._window = window  # a sliding-window model's n_swa (its window layers keep that many positions)
        self.cache = StateCache(max_bytes if enabled else 0)
        self.files = files if enabled else None
        self.enabled = enabled and (max_bytes > 0 or self.files is not None)
        self._n_ctx, self._n_vocab = int(n_ctx or llm.n_ctx()), int(llm.n_vocab())
        self.save_ms = 0.0  # the last save's (after the previous reply)
        # What transcript_for found on disk, for the before_reply of the same reply.
        self._looked: str | None = None
        self._found: DiskState | None = None
        self._looked_ms = 0.0
        # The file this reply's cells came from, until the reply has run (see failed_after_restore).
        self._restored_from: tuple[DiskState, SavedState] | None = None
        self._carried: str | None = None  # a discard by failed_after_restore, for the retried reply's metrics
        self._reset_counts()

    def _reset_counts(self) -> None:
        self._hit = self._disk_hit = False
        self._restored = 0
        self._restore_ms = self._disk_read_ms = self._check_ms = 0.0
        self._discarded, self._carried = self._carried, None
        self._restored_from = None

    def transcript_for(self, conversation_id: str | None) -> Transcript | None:
        """The conversation's transcript as last saved (RAM first, then its file)."""
        self._looked, self._found, self._looked_ms = None, None, 0.0
        if not self.enabled or conversation_id is None:
            return None
        found = self.cache.transcript_for(conversation_id)
        if found is None and self.files is not None:
            t0 = time.perf_counter()
            self._looked, self._found = conversation_id, self._read_meta(conversation_id)
            self._looked_ms = (time.perf_counter() - t0) * 1000.0
            found = self._found.transcript if self._found is not None else None
        return found

    def _read_meta(self, conversation_id: str) -> DiskState | None:
        assert self.files is not None
        found = self.files.find(conversation_id)
        if found is not None and (len(found.tokens) > self._n_ctx or int(found.tokens.max()) >= self._n_vocab):
            self.files.discard(found.path)  # not cells this context could hold
            return None
        return found

    def before_reply(self, slot: Slot, prompt: list[int], conversation_id: str | None = None) -> None:
        """Restore the saved state (RAM, or the conversation's file) that shares the longest prefix
        with `prompt`, when that saves enough evaluation over what the live KV cache already holds."""
        looked, found, looked_ms = self._looked, self._found, self._looked_ms
        self._looked, self._found, self._looked_ms = None, None, 0.0
        self._reset_counts()
        if not self.enabled:
            return
        live = common_prefix(slot.tokens(), prompt)
        state, shared = self.cache.best(prompt) if len(self.cache) else (None, 0)
        if self.files is not None and conversation_id is not None and len(prompt) - 1 - max(live, shared) >= MIN_GAIN:
            if looked == conversation_id:
                disk, self._disk_read_ms = found, looked_ms
            else:
                t0 = time.perf_counter()
                disk = self._read_meta(conversation_id)
                self._disk_read_ms = (time.perf_counter() - t0) * 1000.0
            n = common_prefix(disk.tokens, prompt) if disk is not None else 0
            if (
                disk is not None
                and n > shared
                and worth_restoring(n - live, len(disk.tokens))
                and self._continues(len(disk.tokens), n, len(prompt))
            ):
                t0 = time.perf_counter()
                data = self.files.data_of(disk)
                self._disk_read_ms += (time.perf_counter() - t0) * 1000.0
                if data is not None:
                    saved = SavedState(disk.tokens, data, disk.transcript, disk.check)
                    why = self._restore_checked(slot, saved, n, prompt)
                    if why is None:
                        self._disk_hit = True
                        self._restored_from = (disk, saved)
                        self.files.touch(disk)
                        self.cache.add(saved)
                        return
                    self._discarded = why
                    self.files.discard(disk.path)
                    live = 0
        if (
            state is None
            or not worth_restoring(shared - live, len(state.tokens))
            or not self._continues(len(state.tokens), shared, len(prompt))
        ):
            return
        if self._restore(slot, state, shared, prompt):
            self.cache.touch(state)

    def _continues(self, n_state: int, shared: int, n_prompt: int) -> bool:
        """Whether a prompt of `n_prompt` tokens sharing `shared` with a state of `n_state` can use
        it: a sliding-window model's state past its window holds only the window's last positions
        in those layers, so its cells cannot be cut back; the prompt must go on from all of them."""
        return self._window <= 0 or n_state <= self._window or min(shared, n_prompt - 1) >= n_state

    def _restore_checked(self, slot: Slot, state: SavedState, shared: int, prompt: list[int]) -> str | None:
        """Restore a state read from a file, checked against the tokens it claims (state_check.py):
        None when restored, else why not (the context is then empty)."""
        check, n = state.check, len(state.tokens)
        if check is None:
            return "it has no fingerprint"
        if not cells_in_place(state.data, n, check.cells):
            return "its cells are not those of its tokens' positions"
        if not self._restore(slot, state, shared, prompt):
            return "llama.cpp refused it"
        t0 = time.perf_counter()
        why = verify_restored(self._llm, state.tokens, check, slot.seq)
        self._check_ms = (time.perf_counter() - t0) * 1000.0
        self._restore_ms += self._check_ms
        if why is not None:
            slot.clear()
            self._hit, self._restored = False, 0
        return why

    def new_reply(self) -> None:
        """A reply starts: no file's cells are restored for it yet."""
        self._restored_from = None

    @property
    def restored_from(self) -> tuple[DiskState, SavedState] | None:
        """The file the last before_reply restored cells from (None: none), for failed_after_restore."""
        return self._restored_from

    def failed_after_restore(self, slot: Slot, restored: tuple[DiskState, SavedState] | None, error: str, *, retry: bool) -> bool:
        """The reply failed (a decode error) after this reply's cells were restored from a file: the
        file is deleted, the state leaves the RAM cache and the context is cleared; True when there
        was such a file. With `retry` the next reply's metrics (the same reply run again from the
        start) say why the file went."""
        self._restored_from = None
        if restored is None:
            return False
        disk, saved = restored
        if self.files is not None:
            self.files.discard(disk.path)
        self.cache.remove(saved)
        slot.clear()
        if retry:
            self._carried = f"a decode failed after it was restored ({error})"
        return True

    def _restore(self, slot: Slot, state: SavedState, shared: int, prompt: list[int]) -> bool:
        t0 = time.perf_counter()
        slot.clear()
        ok = llama_cpp.llama_state_seq_set_data(self._llm.ctx, state.pointer(), state.size, slot.seq) == state.size
        if ok:
            slot.evaluated(state.tokens, 0)  # the tokens the cells hold
            self._hit, self._restored = True, min(shared, len(prompt) - 1)
        else:  # the slot's cells are in an unknown state: start from nothing
            slot.clear()
        self._restore_ms += (time.perf_counter() - t0) * 1000.0
        return ok

    def after_reply(self, slot: Slot, transcript: Transcript | None, conversation_id: str | None = None) -> None:
        """Save the live state of the slot's sequence (called once the reply's Finished has been
        sent): into the RAM cache, and queued for the conversation's file."""
        if not self.enabled:
            return
        llm = self._llm
        n = slot.n_tokens
        if n <= 0:
            return
        tokens = np.array(slot.tokens(), dtype=np.intc)
        if transcript is not None and common_prefix(tokens, transcript.tokens) < min(n, len(transcript.tokens)):
            transcript = None  # only a transcript of exactly these cells is worth keeping with them
        saved = self.cache.covered(tokens)
        if saved is not None:
            if transcript is not None and len(saved.tokens) == n:
                saved.transcript = transcript
            self.cache.touch(saved)
        else:
            t0 = time.perf_counter()
            size = int(llama_cpp.llama_state_seq_get_size(llm.ctx, slot.seq))
            limit = max(self.cache.max_bytes, self.files.max_bytes if self.files is not None else 0)
            if 0 < size <= limit:
                data = np.empty(size, dtype=np.uint8)  # not zeroed first: llama.cpp writes every byte
                made = SavedState(tokens, data, transcript)
                if llama_cpp.llama_state_seq_get_data(llm.ctx, made.pointer(), size, slot.seq) == size:
                    # The fingerprint's logits come from the saved cells as a restore lays them out: the
                    # state goes back into the slot first. A restore packs the cells from the cache's
                    # start, and a sliding-window cache that has wrapped around sums its attention in
                    # another order than the live one did (Gemma 3's logits moved by 1.6% of their range).
                    try:
                        if llama_cpp.llama_state_seq_set_data(llm.ctx, made.pointer(), size, slot.seq) != size:
                            raise RuntimeError("the state did not go back")
                        logits = last_logits(llm, tokens, slot.seq)
                    except RuntimeError:  # the cells are in an unknown state: nothing is kept
                        slot.clear()
                        return
                    made.check = take(tokens, logits, data)
                    if made.check is not None:  # non-finite logits: not a state worth keeping
                        self.cache.add(made)
                        saved = made
            self.save_ms = (time.perf_counter() - t0) * 1000.0
        if saved is not None and self.files is not None and conversation_id is not None:
            self.files.save(conversation_id, saved.tokens, saved.data, transcript, owner=saved, check=saved.check)

    def metrics(self) -> dict[str, Any]:
        files = self.files
        m: dict[str, Any] = {
            "enabled": self.enabled,
            "hit": self._hit,
            "restored_tokens": self._restored,
            "entries": len(self.cache),
            "bytes": self.cache.bytes,
            "restore_ms": round(self._restore_ms, 3),
            "save_ms": round(self.save_ms, 3),
            "disk": files is not None,
            "disk_hit": self._disk_hit,
            "disk_read_ms": round(self._disk_read_ms, 3),
            "disk_bytes": files.bytes if files is not None else 0,
            "disk_files": files.files if files is not None else 0,
            "disk_write_ms": round(files.write_ms, 3) if files is not None else 0.0,
        }
        if self._disk_hit:
            m["check_ms"] = round(self._check_ms, 3)  # in restore_ms too
        if self._discarded is not None:
            m["discarded"] = self._discarded  # the conversation's file, and why
        return m
