"""The images of the history's messages: the `message_images` table that links a message to the
images it carries (by SHA-256, in order, with type, pixel size and bytes), reading them back with
the messages, the request content of a message that has images, and removing the image files
(app/images/store.py) that no message refers to any more.

Disk invariant: a file in the images folder is deleted only after the transaction that removed
its last reference has committed, and only while no row refers to its hash; a file a crash left
behind is removed by `sweep_images`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

import sqlite_utils

from app.images.store import ImageStore
from app.store.kept_image import MIMES, KeptImage
from app.store.records import Message
from models.transactions import after_commit

TABLE: Final = "message_images"
# A file this young may belong to a message another process has not committed yet (the front end
# writes the file first): the sweep leaves it.
SWEEP_MIN_AGE_S: Final = 3600.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 500  # ids per query, under SQLite's bound-parameter limit


class ImageLike(Protocol):
    """What add_user_message takes for an image: a KeptImage, or app/images/checks.CheckedImage."""

    @property
    def sha256(self) -> str: ...
    @property
    def mime(self) -> str: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def size(self) -> int: ...


def kept(image: ImageLike, label: str = "an image") -> KeptImage:
    """`image` as the history keeps it; ValueError, one sentence, for an identity that is not one."""
    sha256, mime = getattr(image, "sha256", None), getattr(image, "mime", None)
    numbers = [getattr(image, name, None) for name in ("width", "height", "size")]
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError(f"{label} has no SHA-256 (64 lowercase hex digits), so it cannot be kept")
    if not isinstance(mime, str) or mime not in MIMES:
        raise ValueError(f"{label} is of type {mime!r}; the history keeps PNG, JPEG, WebP and GIF images")
    sizes = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    if len(sizes) != 3 or sizes[0] < 1 or sizes[1] < 1 or sizes[2] < 0:
        raise ValueError(f"{label} has no size in pixels and bytes, so it cannot be kept")
    return KeptImage(sha256, mime, sizes[0], sizes[1], sizes[2])


def kept_all(images: Iterable[ImageLike]) -> tuple[KeptImage, ...]:
    """Each image checked with `kept`, named by its place ("image 2") in a refusal."""
    return tuple(kept(image, f"image {n}") for n, image in enumerate(images, 1))


def write_images(db: sqlite_utils.Database, message_id: str, images: Sequence[KeptImage]) -> None:
    """Link `images`, in order, to the message; inside the caller's write transaction."""
    if images:
        db.table(TABLE).insert_all(
            {
                "message_id": message_id,
                "position": n,
                "sha256": i.sha256,
                "mime": i.mime,
                "width": i.width,
                "height": i.height,
                "bytes": i.size,
            }
            for n, i in enumerate(images)
        )


_SELECT = f"SELECT i.message_id, i.sha256, i.mime, i.width, i.height, i.bytes FROM {TABLE} i"


def _grouped(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[KeptImage, ...]]:
    found: dict[str, list[KeptImage]] = {}
    for message_id, *values in rows:
        found.setdefault(message_id, []).append(KeptImage(*values))
    return {key: tuple(value) for key, value in found.items()}


def images_of_conversation(db: sqlite_utils.Database, conversation_id: str) -> dict[str, tuple[KeptImage, ...]]:
    """Every image of a conversation's messages (all branches) by message id: one query."""
    rows = db.conn.execute(
        _SELECT + " JOIN messages m ON m.id = i.message_id WHERE m.conversation_id = ? ORDER BY i.message_id, i.position", [conversation_id]
    )
    return _grouped(rows)


def images_of(db: sqlite_utils.Database, message_ids: Sequence[str]) -> dict[str, tuple[KeptImage, ...]]:
    """The images of these messages by message id (those with none are left out)."""
    found: dict[str, tuple[KeptImage, ...]] = {}
    for start in range(0, len(message_ids), _CHUNK):
        chunk = list(message_ids[start : start + _CHUNK])
        marks = ", ".join("?" * len(chunk))
        found.update(_grouped(db.conn.execute(_SELECT + f" WHERE i.message_id IN ({marks}) ORDER BY i.message_id, i.position", chunk)))
    return found


def with_images(messages: list[Message], found: dict[str, tuple[KeptImage, ...]]) -> list[Message]:
    """`messages` with their images from `found` (images_of / images_of_conversation)."""
    if not found:
        return messages
    return [dataclasses.replace(m, images=found[m.id]) if m.id in found else m for m in messages]


def read_with_images(db: sqlite_utils.Database, messages: list[Message]) -> list[Message]:
    """`messages` with their images, read in one query (per 500 messages)."""
    return with_images(messages, images_of(db, [m.id for m in messages])) if messages else messages


def request_content(message: Message) -> str | list[dict[str, Any]]:
    """A history message's content as a request carries it: its text, or, when it has images, a
    list of parts: each image first (KeptImage.part, in the order they were attached), then
    the text ({"type": "text", "text"}) when there is any."""
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = [image.part() for image in message.images]
    if message.content:
        parts.append({"type": "text", "text": message.content})
    return parts


# -- the image files -------------------------------------------------------------------------


def images_beside(db: sqlite_utils.Database) -> ImageStore:
    """The images folder of the history file `db` (app/paths.py: `images` beside `cove.db`). A
    database in memory gets a folder of its own under the system's temporary folder, made only
    when an image is put there."""
    path = next((row[2] for row in db.conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    if not path:
        return ImageStore(Path(tempfile.gettempdir()) / f"cove-images-{uuid.uuid4().hex}")
    return ImageStore(Path(path).with_name("images"))


def images_in_use(db: sqlite_utils.Database) -> set[str]:
    """The SHA-256 of every image some message refers to."""
    return {row[0] for row in db.conn.execute(f"SELECT DISTINCT sha256 FROM {TABLE}")}


def conversation_image_hashes(db: sqlite_utils.Database, conversation_id: str) -> set[str]:
    """The SHA-256 of every image of a conversation's messages."""
    rows = db.conn.execute(
        f"SELECT DISTINCT i.sha256 FROM {TABLE} i JOIN messages m ON m.id = i.message_id WHERE m.conversation_id = ?", [conversation_id]
    )
    return {row[0] for row in rows}


def remove_after_commit(db: sqlite_utils.Database, store: ImageStore | None, hashes: set[str]) -> None:
    """Once the open write transaction commits, delete the files of those `hashes` (read inside it,
    before its rows went) that no message refers to then: never before the commit, never if it
    rolls back."""
    if store is not None and hashes:
        kept_in = store

        def remove() -> None:
            remove_unused(db, kept_in, hashes)

        after_commit(db, remove)


def remove_unused(db: sqlite_utils.Database, store: ImageStore, hashes: Iterable[str]) -> int:
    """Delete the files of those `hashes` that no message refers to; returns how many went. A file
    that cannot be deleted now is left for `sweep_images`."""
    removed = 0
    try:
        for sha256 in sorted(set(hashes)):
            if not _in_use(db, sha256) and store.remove(sha256):
                removed += 1
    except (OSError, sqlite3.Error):
        pass  # the sweep at a later start finds what is left
    return removed


def sweep_images(db: sqlite_utils.Database, store: ImageStore, *, min_age_s: float = SWEEP_MIN_AGE_S) -> int:
    """Delete the image files no message refers to (left by a crash between a delete's commit and
    its files' removal), and temporary files of writes that never finished; returns how many image
    files went. Files younger than `min_age_s` stay: their message may not be committed yet. Files
    older than the history file stay too: they belong to a history before it (one moved aside as
    damaged), whose messages this one cannot see."""
    began = _history_began(db)
    if began is None:
        return 0
    used = images_in_use(db)
    cutoff = time.time() - min_age_s
    removed = 0
    try:
        for sha256 in sorted(store.holds() - used):
            path = store.path(sha256)
            if path is not None and _made_between(path, began, cutoff) and not _in_use(db, sha256) and store.remove(sha256):
                removed += 1
        for stale in store.folder.glob(".*"):  # a write that never finished (app/atomic_file.py)
            if _made_between(stale, began, cutoff):
                stale.unlink(missing_ok=True)
    except OSError:
        pass  # what cannot be removed now is tried again at the next sweep
    return removed


def _history_began(db: sqlite_utils.Database) -> float | None:
    """When the history file was made (its first migration), as a POSIX time; None if unknown."""
    try:
        row = db.conn.execute("SELECT min(applied_at) FROM _migrations").fetchone()
        return datetime.fromisoformat(row[0]).timestamp() if row and row[0] else None
    except (sqlite3.Error, ValueError):
        return None


def _in_use(db: sqlite_utils.Database, sha256: str) -> bool:
    """Whether a message refers to the image now (asked again just before its file goes: a message
    may have been committed since the caller looked)."""
    return db.conn.execute(f"SELECT 1 FROM {TABLE} WHERE sha256 = ? LIMIT 1", [sha256]).fetchone() is not None


def _made_between(path: Path, began: float, cutoff: float) -> bool:
    try:
        return began <= os.stat(path).st_mtime <= cutoff
    except OSError:
        return False
