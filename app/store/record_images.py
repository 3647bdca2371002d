"""The images of a request as the written record keeps them: by identity only. Each image part of
a message's content becomes {"type": "image", "sha256", "mime", "width", "height", "bytes"} (the
bytes from the part, or from the history's `message_images` when the part has none; null when
neither knows); pixels, base64 and URLs are never written into an entry.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any, Final

import sqlite_utils

from app.store.message_images import TABLE

# Parts of the APIs' own shapes that carry an image's data (a data: URI, base64): never recorded.
_INLINE: Final = frozenset({"image_url", "input_image"})
LEFT_OUT: Final = "the image's data, which the record never keeps"


def recorded_messages(db: sqlite_utils.Database, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each image part as its identity (the others unchanged); the same list when
    no message has a list of parts."""
    if not any(isinstance(m.get("content"), list) for m in messages if isinstance(m, Mapping)):
        return messages
    sizes = _sizes(db, {str(p.get("sha256")) for p in _image_parts(messages) if not _is_size(p.get("bytes"))})
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list):
            m = {**m, "content": [_recorded_part(p, sizes) for p in content]}
        out.append(m)
    return out


def _recorded_part(part: Any, sizes: dict[str, int]) -> Any:
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if kind == "image" and "source" not in part:
        sha256 = str(part.get("sha256") or "")
        size = part.get("bytes")
        return {
            "type": "image",
            "sha256": sha256,
            "mime": str(part.get("mime") or ""),
            "width": _int(part.get("width")),
            "height": _int(part.get("height")),
            "bytes": size if _is_size(size) else sizes.get(sha256),
        }
    if kind in _INLINE or kind == "image":  # an image as a client wrote it, with its data
        return {"type": kind, "left_out": LEFT_OUT}
    return part


def _image_parts(messages: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        p
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, Mapping) and p.get("type") == "image" and "source" not in p
    ]


def _sizes(db: sqlite_utils.Database, hashes: set[str]) -> dict[str, int]:
    """The size in bytes the history knows for each of `hashes`."""
    wanted = sorted(hashes)
    found: dict[str, int] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        try:
            rows = db.conn.execute(f"SELECT sha256, max(bytes) FROM {TABLE} WHERE sha256 IN ({marks}) GROUP BY sha256", chunk).fetchall()
        except sqlite3.OperationalError:  # a database without the table (none of its messages has an image)
            return found
        found.update(rows)
    return found


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
