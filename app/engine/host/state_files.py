"""The disk tier of the saved KV state: one file per conversation and engine setup,
`<state_dir>/<conversation folder>/<key>.kvstate`, so a conversation reopened after a restart or a
model switch restores its state instead of evaluating its prompt again.

A file is a 32-byte prefix (magic, format version, meta length and CRC-32, data length and CRC-32),
the meta (UTF-8 JSON: key, conversation id, the tokens the cells hold, the transcript's text and
tokens, the fingerprint that binds the cells to those tokens: app/engine/host/state_check.py) and the
data (`llama_state_seq_get_data` of sequence 0, written from the very array the RAM cache holds).
`key` (app/engine/host/state_key.py) names the model file and context settings, so a file is only ever
read back by an identical setup. A file that is not exactly what this code writes, or whose meta
does not match, is deleted when read; the checksums only catch damage, and what binds the data to
the meta is checked when it is restored (state_cache.py). Writes happen on one background thread
per process, after the reply; the folder's total size is kept under a limit by deleting the least
recently used files (mtime, touched on use). Host-internal, but no llama.cpp calls here.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import threading
import time
import weakref
import zlib
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.engine.host.state_check import Fingerprint
from app.engine.host.transcript import Transcript
from app.engine.state_folders import conversation_folder, is_forgotten

MAGIC = b"CoveKVS\n"
FORMAT_VERSION = 2  # 2: the meta has the fingerprint ("check")
SUFFIX = ".kvstate"
PREFIX = struct.Struct("<8sIIIQI")  # magic, version, meta_len, meta_crc, data_len, data_crc (32 bytes)
MAX_META = 64 * 1024 * 1024  # far above any real meta (a 128k-token context's tokens twice)
STALE_TEMP_S = 3600  # a temp file this old was left by a writer that died


class BadStateFile(Exception):
    """The file is not a complete state file of this format; it is deleted."""


@dataclass(eq=False)
class DiskState:
    """A state file's meta, read (or a write not done yet, with its data in memory)."""

    path: Path
    conversation_id: str
    tokens: np.ndarray  # intc
    transcript: Transcript | None
    data_len: int
    data_crc: int = 0
    offset: int = 0
    ino: int = 0  # the file the meta was read from (a replaced file is another inode)
    data: np.ndarray | None = None  # set while the write is pending
    check: Fingerprint | None = None  # None: saved without one (never restored by the engine)


def _crc(buffer: Any) -> int:
    return zlib.crc32(memoryview(buffer).cast("B")) & 0xFFFFFFFF  # zlib releases the GIL for large buffers


def encode_meta(
    key: str, conversation_id: str, tokens: np.ndarray, transcript: Transcript | None, check: Fingerprint | None = None
) -> bytes:
    meta: dict[str, Any] = {
        "key": key,
        "conversation_id": conversation_id,
        "tokens": tokens.tolist(),
        "transcript": None if transcript is None else {"text": transcript.text, "tokens": list(transcript.tokens)},
        "check": None if check is None else check.to_json(),
    }
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def encode_prefix(meta: bytes, data: np.ndarray) -> bytes:
    return PREFIX.pack(MAGIC, FORMAT_VERSION, len(meta), _crc(meta), int(data.nbytes), _crc(data))


def _int_list(value: Any) -> list[int]:
    # Negative ids stand for an image's places (app/engine/host/image_prompt.py image_tokens).
    if not isinstance(value, list) or not all(type(t) is int and -(2**31) <= t < 2**31 for t in value):
        raise BadStateFile("its tokens are not a list of token ids")
    return value


def read_meta(path: Path, key: str) -> DiskState:
    """The meta of the state file at `path`. FileNotFoundError when there is none; BadStateFile when
    it is truncated, damaged, of another format version or for another key."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        head = f.read(PREFIX.size)
        if len(head) < PREFIX.size:
            raise BadStateFile("it is shorter than the header")
        magic, version, meta_len, meta_crc, data_len, data_crc = PREFIX.unpack(head)
        if magic != MAGIC:
            raise BadStateFile("it is not a Cove state file")
        if version != FORMAT_VERSION:
            raise BadStateFile(f"it has format version {version}, not {FORMAT_VERSION}")
        if meta_len > MAX_META or PREFIX.size + meta_len + data_len != st.st_size:
            raise BadStateFile("its length is not the one its header gives (truncated?)")
        raw = f.read(meta_len)
    if len(raw) != meta_len or _crc(raw) != meta_crc:
        raise BadStateFile("its meta fails its checksum")
    try:
        meta = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadStateFile("its meta is not JSON") from exc
    if not isinstance(meta, dict) or meta.get("key") != key or not isinstance(meta.get("conversation_id"), str):
        raise BadStateFile("it was saved for another model or context settings")
    tokens = _int_list(meta.get("tokens"))
    if not tokens:
        raise BadStateFile("it holds no tokens")
    transcript = None
    held = meta.get("transcript")
    if held is not None:
        if not isinstance(held, dict) or not isinstance(held.get("text"), str):
            raise BadStateFile("its transcript is malformed")
        transcript = Transcript(meta["conversation_id"], held["text"], tuple(_int_list(held.get("tokens"))))
    check = None
    if meta.get("check") is not None:
        check = Fingerprint.from_json(meta["check"])
        if check is None:
            raise BadStateFile("its fingerprint is malformed")
    return DiskState(
        path,
        meta["conversation_id"],
        np.array(tokens, dtype=np.intc),
        transcript,
        data_len,
        data_crc,
        PREFIX.size + meta_len,
        st.st_ino,
        check=check,
    )


def read_data(state: DiskState) -> np.ndarray | None:
    """The state bytes of a file whose meta was read, checksum verified. None when the file was
    replaced or removed since (another process wrote a newer one); BadStateFile when damaged."""
    with open(state.path, "rb", buffering=0) as f:
        st = os.fstat(f.fileno())
        if st.st_ino != state.ino or st.st_size != state.offset + state.data_len:
            return None
        f.seek(state.offset)
        data = np.empty(state.data_len, dtype=np.uint8)
        view, done = data.data, 0
        while done < state.data_len:
            n = f.readinto(view[done:])
            if not n:
                raise BadStateFile("it ends before its data does")
            done += n
    if _crc(data) != state.data_crc:
        raise BadStateFile("its data fails its checksum")
    return data


def write_atomic(path: Path, parts: tuple[bytes, ...], data: np.ndarray) -> None:
    """Write `parts` then `data` to `path` through a temp file in the same folder and os.replace:
    a reader (or a crash) sees the old file or the new one, never half of one. No fsync: after a
    power loss a file may be torn or empty, which its checksums and length catch on reading (the file
    is then deleted and the prompt evaluated), and a cache is not worth the write latency of fsync.
    The temp file is removed when anything fails (disk full, folder not writable); OSError is raised."""
    for attempt in range(2):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        except FileNotFoundError:  # the empty folder was removed by another process's eviction
            if attempt:
                raise
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                for part in parts:
                    f.write(part)
                f.write(data.data)  # straight from the array, no copy
            os.replace(tmp, path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise
        return


class _Writer:
    """One background thread per process that runs the queued writes in order. Not a daemon:
    a host that exits finishes the writes it has queued. The thread ends when the queue is empty
    and a new one starts with the next job."""

    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._cond = threading.Condition()
        self._running = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="state-files", daemon=False).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._running = False
                    self._cond.notify_all()
                    return
                job = self._jobs.popleft()
            with suppress(Exception):  # a cache write never takes anything down with it
                job()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout_s)


WRITER = _Writer()
# The writes queued and not yet done, by file, for every StateFiles of the process: a model loaded
# again in the same host finds the state its previous load is still writing.
_PENDING: dict[Path, DiskState] = {}
_PENDING_LOCK = threading.Lock()


class StateFiles:
    """One engine setup's view of the state folder: find, read, queue writes, evict."""

    def __init__(self, root: Path, max_bytes: int, key: str) -> None:
        self.root, self.max_bytes, self.key = root, max_bytes, key
        self.bytes = self.files = 0  # the folder's state files at the last scan (all keys)
        self.write_ms = 0.0  # the last write's
        self._written: dict[str, tuple[weakref.ref[Any], Transcript | None]] = {}
        WRITER.submit(self._scan_and_evict)  # the totals, and temp files a dead writer left

    def path_for(self, conversation_id: str) -> Path:
        return conversation_folder(self.root, conversation_id) / f"{self.key}{SUFFIX}"

    def find(self, conversation_id: str) -> DiskState | None:
        """The saved state of `conversation_id` for this setup (a pending write first), or None."""
        path = self.path_for(conversation_id)
        with _PENDING_LOCK:
            pending = _PENDING.get(path)
        if pending is not None:
            return pending
        try:
            found = read_meta(path, self.key)
        except BadStateFile:
            self.discard(path)
            return None
        except OSError:  # none saved (or the folder unreadable): the prompt is evaluated
            return None
        if found.conversation_id != conversation_id:
            self.discard(path)
            return None
        return found

    def data_of(self, state: DiskState) -> np.ndarray | None:
        if state.data is not None:
            return state.data
        try:
            return read_data(state)
        except BadStateFile:
            self.discard(state.path)
        except OSError:
            pass
        return None

    def touch(self, state: DiskState) -> None:
        """Mark a state file as just used (its mtime orders the eviction)."""
        if state.data is None:
            with suppress(OSError):
                os.utime(state.path)

    def discard(self, path: Path) -> None:
        with suppress(OSError):
            os.unlink(path)

    def save(
        self,
        conversation_id: str,
        tokens: np.ndarray,
        data: np.ndarray,
        transcript: Transcript | None,
        owner: object,
        check: Fingerprint | None = None,
    ) -> None:
        """Queue writing this state as `conversation_id`'s (the newest replaces the file). `owner`
        is the RAM cache's entry holding `data`: the same entry with the same transcript is not
        written twice. A state larger than the whole limit is not written."""
        if int(data.nbytes) + PREFIX.size > self.max_bytes:
            return
        done = self._written.get(conversation_id)
        if done is not None and done[0]() is owner and done[1] is transcript:
            return
        self._written[conversation_id] = (weakref.ref(owner), transcript)
        path = self.path_for(conversation_id)
        state = DiskState(path, conversation_id, tokens, transcript, int(data.nbytes), data=data, check=check)
        with _PENDING_LOCK:
            _PENDING[path] = state
        WRITER.submit(lambda: self._write(state))

    def _write(self, state: DiskState) -> None:
        path = state.path
        try:
            with _PENDING_LOCK:
                if _PENDING.get(path) is not state:
                    return  # a newer state of the conversation is queued
            if is_forgotten(path.parent):
                return
            assert state.data is not None
            t0 = time.perf_counter()
            meta = encode_meta(self.key, state.conversation_id, state.tokens, state.transcript, state.check)
            try:
                write_atomic(path, (encode_prefix(meta, state.data), meta), state.data)
            except OSError:
                return  # disk full, folder not writable: the state is simply not kept on disk
            self.write_ms = (time.perf_counter() - t0) * 1000.0
            if is_forgotten(path.parent):  # deleted while it was being written
                self.discard(path)
                with suppress(OSError):
                    path.parent.rmdir()
                return
        finally:
            with _PENDING_LOCK:
                if _PENDING.get(path) is state:
                    del _PENDING[path]
        self._scan_and_evict()

    def _scan_and_evict(self) -> None:
        """Count the folder's state files and delete the least recently used until the total is
        within the limit; remove stale temp files and empty conversation folders."""
        now = time.time()
        files: list[tuple[int, int, str]] = []  # (mtime_ns, size, path)
        try:
            folders = [e for e in os.scandir(self.root) if not e.name.startswith(".") and e.is_dir()]
        except OSError:
            return
        for folder in folders:
            try:
                entries = list(os.scandir(folder.path))
            except OSError:
                continue
            for entry in entries:
                with suppress(OSError):
                    st = entry.stat()
                    if entry.name.endswith(SUFFIX):
                        files.append((st.st_mtime_ns, st.st_size, entry.path))
                    elif entry.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_S:
                        os.unlink(entry.path)
            if not entries:
                with suppress(OSError):
                    os.rmdir(folder.path)  # fails if another process has just put a file in it
        files.sort()
        total = sum(size for _, size, _ in files)
        count = len(files)
        for _, size, path in files:
            if total <= self.max_bytes:
                break
            with suppress(OSError):
                os.unlink(path)
            total -= size
            count -= 1
            with suppress(OSError):
                os.rmdir(os.path.dirname(path))
        self.bytes, self.files = total, count

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait for the queued writes (tests, and a caller that wants the files on disk now)."""
        return WRITER.wait_idle(timeout_s)
