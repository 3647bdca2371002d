"""An image of a history message, as the history keeps it (`KeptImage`): its identity, type, size in
pixels and bytes, with what a front end shows of it. Imports nothing of the store, so the message
row type (app/store/records.py) can name it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MIMES: Final = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


@dataclass(frozen=True)
class KeptImage:
    """An image of a message as the history keeps it: the SHA-256 of its file (its name in the
    images folder), its MIME type, its width and height in pixels and its size in bytes."""

    sha256: str
    mime: str
    width: int
    height: int
    size: int

    def part(self) -> dict[str, Any]:
        """The image as a request's content lists it: app/engine/request.py ImagePart.to_dict's
        shape (written here: the history does not import the engine)."""
        return {"type": "image", "sha256": self.sha256, "mime": self.mime, "width": self.width, "height": self.height}

    @property
    def extension(self) -> str:
        """The file extension its type has ("png", "jpg", "webp", "gif")."""
        return MIMES.get(self.mime, "img")

    def describe(self) -> str:
        """ "PNG, 640×480, 12.3 kB" for a sentence."""
        kind = self.extension.upper() if self.mime in MIMES else self.mime
        return f"{kind}, {self.width}×{self.height}, {_amount(self.size)}"


def _amount(size: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if size >= scale:
            return f"{size / scale:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{size} byte" if size == 1 else f"{size} bytes"
