"""Which folder of the saved-state directory holds a conversation's KV state files
(app/engine/host/state_files.py), and removing those folders: when a conversation is deleted, and for
conversations the history no longer has.

No llama.cpp and no database: the history (app/store/history.py), app/core.py and the engine host
all use it. Every function tolerates files and folders that vanish or appear meanwhile (a second
Cove process may share the directory).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path

# A conversation id that is safe as a folder name on every file system is used as it is (the
# history's ids are uuid4 hex); any other id is named by its hash. Lower case only, so two ids
# never share a folder on a case-insensitive file system.
_PLAIN_ID = re.compile(r"[0-9a-z_-]{1,64}")
TOMBSTONES = ".deleted"  # <state_dir>/.deleted/<folder>: that conversation was deleted
TOMBSTONE_KEEP_S = 24 * 3600  # longer than any reply that could still be finishing


def folder_name(conversation_id: str) -> str:
    if _PLAIN_ID.fullmatch(conversation_id):
        return conversation_id
    return "h-" + hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def conversation_folder(state_dir: Path, conversation_id: str) -> Path:
    return state_dir / folder_name(conversation_id)


def is_forgotten(folder: Path) -> bool:
    """The conversation of `folder` was deleted (its states must not be written again)."""
    return (folder.parent / TOMBSTONES / folder.name).exists()


def forget_conversation(state_dir: Path, conversation_id: str) -> None:
    """Delete a conversation's saved states. A tombstone is left first, so a reply of it that is
    still finishing does not write its state again (state_files.py checks before and after
    writing). Failures are ignored: the next prune_state_folders removes what is left."""
    folder = conversation_folder(state_dir, conversation_id)
    with suppress(OSError):
        tombstones = state_dir / TOMBSTONES
        tombstones.mkdir(parents=True, exist_ok=True)
        (tombstones / folder.name).touch()
    shutil.rmtree(folder, ignore_errors=True)


def prune_state_folders(state_dir: Path, conversation_ids: Callable[[], Iterable[str]]) -> int:
    """Remove the folders of conversations that `conversation_ids()` no longer lists, and old
    tombstones; returns how many conversation folders went.

    The folders are listed before the ids are asked for: a conversation exists before its first
    state is written, so a folder that appears meanwhile is never taken for a deleted one."""
    try:
        folders = [e.name for e in os.scandir(state_dir) if _PLAIN_ID.fullmatch(e.name) and e.is_dir()]
    except OSError:  # no such folder yet, or unreadable: nothing to prune
        return 0
    removed = 0
    if folders:
        alive = {folder_name(cid) for cid in conversation_ids()}
        for name in folders:
            if name not in alive:
                shutil.rmtree(state_dir / name, ignore_errors=True)
                removed += 1
    _drop_old_tombstones(state_dir / TOMBSTONES)
    return removed


def _drop_old_tombstones(tombstones: Path) -> None:
    now = time.time()
    try:
        entries = list(os.scandir(tombstones))
    except OSError:
        return
    for entry in entries:
        with suppress(OSError):
            if now - entry.stat().st_mtime > TOMBSTONE_KEEP_S:
                os.unlink(entry.path)
