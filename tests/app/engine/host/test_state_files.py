"""The disk tier's files on their own (app/engine/host/state_files.py, app/engine/state_folders.py): the
format round trip, what a damaged or foreign file does, the size limit's least-recently-used
eviction, writes that fail, and deleted conversations' folders. No engine: states are random bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.engine.host import state_files
from app.engine.host.state_files import PREFIX, SUFFIX, BadStateFile, StateFiles, read_data, read_meta
from app.engine.host.transcript import Transcript
from app.engine.state_folders import (
    TOMBSTONE_KEEP_S,
    TOMBSTONES,
    conversation_folder,
    folder_name,
    forget_conversation,
    is_forgotten,
    prune_state_folders,
)
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

KEY = "k" * 32


class Entry:
    """Stands for the RAM cache's entry that owns a state's bytes (save() keeps a weak reference)."""


def saved(files: StateFiles, conversation: str, n_tokens: int, size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, 900, n_tokens).astype(np.intc)
    data = rng.integers(0, 256, size).astype(np.uint8)
    transcript = Transcript(conversation, f"text of {conversation}", tuple(int(t) for t in tokens))
    files.save(conversation, tokens, data, transcript, owner=Entry())
    assert files.flush()
    return tokens, data


def state_paths(root: Path) -> list[Path]:
    return sorted(root.rglob(f"*{SUFFIX}"))


def test_a_state_written_reads_back_exactly(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    tokens, data = saved(files, "0a1b", 300, 50_000)
    path = files.path_for("0a1b")
    assert path == tmp_path / "0a1b" / f"{KEY}{SUFFIX}" and state_paths(tmp_path) == [path]
    meta = read_meta(path, KEY)
    assert np.array_equal(meta.tokens, tokens) and meta.conversation_id == "0a1b" and meta.data is None
    assert meta.transcript == Transcript("0a1b", "text of 0a1b", tuple(int(t) for t in tokens))
    assert path.stat().st_size == meta.offset + 50_000 and meta.offset > PREFIX.size
    back = read_data(meta)
    assert back is not None and np.array_equal(back, data)
    found = files.find("0a1b")
    assert found is not None and np.array_equal(files.data_of(found), data)  # type: ignore[arg-type]
    assert files.find("ffff") is None
    assert files.bytes == path.stat().st_size and files.files == 1 and files.write_ms > 0
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_file_of_another_key_is_neither_read_nor_deleted(tmp_path: Path) -> None:
    mine = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    other = StateFiles(tmp_path, 10 * 1024 * 1024, "o" * 32)
    saved(other, "abcd", 50, 4000)
    assert mine.find("abcd") is None and other.find("abcd") is not None
    # Copied over this key's name, it is refused (its meta names its own key) and removed.
    os.replace(other.path_for("abcd"), mine.path_for("abcd"))
    with pytest.raises(BadStateFile, match="another model"):
        read_meta(mine.path_for("abcd"), KEY)
    assert mine.find("abcd") is None and not mine.path_for("abcd").exists()


def damage_truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def damage_random(path: Path) -> None:
    path.write_bytes(np.random.default_rng(3).integers(0, 256, path.stat().st_size).astype(np.uint8).tobytes())


def damage_version(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[8:12] = (99).to_bytes(4, "little")
    path.write_bytes(bytes(raw))


def damage_meta(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[PREFIX.size + 5] ^= 0x20
    path.write_bytes(bytes(raw))


def damage_empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [damage_truncate, damage_random, damage_version, damage_meta, damage_empty])
def test_a_damaged_file_is_not_used_and_is_deleted(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    saved(files, "c0ffee", 120, 30_000)
    path = files.path_for("c0ffee")
    damage(path)
    with pytest.raises(BadStateFile):
        read_meta(path, KEY)
    assert files.find("c0ffee") is None
    assert not path.exists()


def test_damaged_data_is_caught_by_its_checksum_and_deleted(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    saved(files, "beef", 120, 30_000)
    path = files.path_for("beef")
    with open(path, "r+b") as f:
        f.seek(-100, os.SEEK_END)
        byte = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    found = files.find("beef")  # the meta is intact
    assert found is not None
    assert files.data_of(found) is None and not path.exists()


def test_a_file_replaced_between_meta_and_data_is_a_miss_not_damage(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    saved(files, "d00d", 40, 8000, seed=1)
    old = files.find("d00d")
    assert old is not None
    _, newer = saved(files, "d00d", 60, 9000, seed=2)  # another process wrote a newer state meanwhile
    assert files.data_of(old) is None
    fresh = files.find("d00d")
    assert fresh is not None and np.array_equal(files.data_of(fresh), newer)  # type: ignore[arg-type]


def test_a_pending_write_is_found_before_it_reaches_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    assert files.flush()
    jobs: list = []
    monkeypatch.setattr(state_files.WRITER, "submit", jobs.append)  # hold the write back
    tokens = np.arange(3, 40, dtype=np.intc)
    data = np.full(5000, 7, dtype=np.uint8)
    files.save("aaaa", tokens, data, None, owner=Entry())
    found = files.find("aaaa")
    assert found is not None and found.data is data and not files.path_for("aaaa").exists()
    monkeypatch.undo()
    for job in jobs:
        job()
    assert files.find("aaaa") is not None and files.find("aaaa").data is None  # type: ignore[union-attr]


def test_the_same_entry_is_not_written_twice(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    owner = Entry()
    tokens, data = np.arange(3, 30, dtype=np.intc), np.ones(3000, dtype=np.uint8)
    files.save("abab", tokens, data, None, owner=owner)
    assert files.flush()
    path = files.path_for("abab")
    path.unlink()
    files.save("abab", tokens, data, None, owner=owner)
    assert files.flush() and not path.exists()
    files.save("abab", tokens, data, Transcript("abab", "t", (3, 4)), owner=owner)  # a new transcript: written
    assert files.flush() and path.exists()


def test_the_limit_evicts_the_least_recently_used(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 100_000, KEY)
    for i, name in enumerate(["c1", "c2", "c3"]):
        saved(files, name, 50, 30_000, seed=i)
        os.utime(files.path_for(name), ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # c1 oldest
    assert len(state_paths(tmp_path)) == 3
    found = files.find("c1")
    assert found is not None
    files.touch(found)  # c1 used now: c2 is the least recently used
    saved(files, "c4", 50, 30_000, seed=4)
    assert [p.parent.name for p in state_paths(tmp_path)] == ["c1", "c3", "c4"]
    assert files.bytes <= 100_000 and files.files == 3
    assert not (tmp_path / "c2").exists()  # its emptied folder goes too
    saved(files, "big", 10, 200_000)  # larger than the whole limit: not written, nothing evicted for it
    assert [p.parent.name for p in state_paths(tmp_path)] == ["c1", "c3", "c4"]


def test_files_that_vanish_or_appear_meanwhile_are_tolerated(tmp_path: Path) -> None:
    one = StateFiles(tmp_path, 100_000, KEY)
    two = StateFiles(tmp_path, 100_000, KEY)  # a second process on the same folder
    saved(one, "e1", 20, 40_000, seed=1)
    saved(two, "e2", 20, 40_000, seed=2)
    found = two.find("e1")
    assert found is not None
    one.path_for("e1").unlink()
    assert two.data_of(found) is None and two.find("e1") is None
    saved(one, "e3", 20, 40_000, seed=3)
    assert {p.parent.name for p in state_paths(tmp_path)} == {"e2", "e3"}
    assert one.bytes <= 100_000


def test_a_stale_temp_file_is_removed_and_a_fresh_one_kept(tmp_path: Path) -> None:
    folder = tmp_path / "abc"
    folder.mkdir()
    stale, fresh = folder / ".x.tmp", folder / ".y.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    old = time.time() - 2 * state_files.STALE_TEMP_S
    os.utime(stale, (old, old))
    files = StateFiles(tmp_path, 100_000, KEY)
    assert files.flush()
    assert not stale.exists() and fresh.exists()


def test_a_folder_that_cannot_be_written_loses_the_state_quietly(tmp_path: Path) -> None:
    blocker = tmp_path / "in-the-way"
    blocker.write_text("a file where the state folder should be")
    files = StateFiles(blocker / "states", 100_000, KEY)
    saved(files, "abc", 20, 1000)
    assert files.find("abc") is None and files.files == 0


WRITE_UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
import numpy as np
sys.path.insert(0, {root!r})
from pathlib import Path
from app.engine.host.state_files import write_atomic
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the kernel then fails the write with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    write_atomic(Path({path!r}), (b"head",), np.ones(200_000, dtype=np.uint8))
except OSError as exc:
    print("failed", exc.errno)
else:
    print("written")
"""


def test_a_write_that_runs_out_of_space_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    """A real short write: the kernel refuses bytes past the file size limit, as on a full disk."""
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    _, data = saved(files, "f00", 30, 2000)
    path = files.path_for("f00")
    code = WRITE_UNDER_A_FILE_SIZE_LIMIT.format(root=str(REPO_ROOT), path=str(path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("failed"), done.stdout + done.stderr
    assert list(path.parent.iterdir()) == [path]  # no temp file left
    found = files.find("f00")
    assert found is not None and np.array_equal(files.data_of(found), data)  # type: ignore[arg-type]


# ---- conversation folders ------------------------------------------------------------------


def test_folder_names_are_the_id_or_its_hash() -> None:
    assert folder_name("0f" * 16) == "0f" * 16
    odd = [folder_name(x) for x in ("A", "a/b", "..", "x" * 65, "é", "a b")]
    assert all(n.startswith("h-") and len(n) == 42 for n in odd) and len(set(odd)) == len(odd)
    assert folder_name("A") != folder_name("a")


def test_forgetting_a_conversation_removes_its_states_and_refuses_later_ones(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    saved(files, "gone", 30, 2000)
    saved(files, "kept", 30, 2000)
    forget_conversation(tmp_path, "gone")
    assert not conversation_folder(tmp_path, "gone").exists() and is_forgotten(conversation_folder(tmp_path, "gone"))
    saved(files, "gone", 40, 3000)  # a reply that was still finishing
    assert [p.parent.name for p in state_paths(tmp_path)] == ["kept"]
    forget_conversation(tmp_path / "never-made", "x")  # no folder yet: no error


def test_prune_removes_the_folders_of_conversations_that_no_longer_exist(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, 10 * 1024 * 1024, KEY)
    for name in ("aaaa", "bbbb", "cccc"):
        saved(files, name, 10, 500)
    (tmp_path / TOMBSTONES).mkdir()
    old_tomb, new_tomb = tmp_path / TOMBSTONES / "zzzz", tmp_path / TOMBSTONES / "yyyy"
    old_tomb.touch()
    new_tomb.touch()
    old = time.time() - 2 * TOMBSTONE_KEEP_S
    os.utime(old_tomb, (old, old))
    assert prune_state_folders(tmp_path, lambda: ["bbbb", "dddd"]) == 2
    assert [p.parent.name for p in state_paths(tmp_path)] == ["bbbb"]
    assert not old_tomb.exists() and new_tomb.exists()
    assert prune_state_folders(tmp_path / "missing", lambda: []) == 0
