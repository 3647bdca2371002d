"""A gzip-compressed file (Debian's "changelog.html.gz") unpacked as it is read, for the readers
that read from start to end: at most MAX_BYTES unpacked, as a plain file may hold, and a damaged
or cut-short stream turned into one sentence."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, cast

from app.docs.readers._base import MAX_BYTES, Unreadable, os_sentence, size_text

GZIP_SUFFIX = ".gz"
DAMAGED = "is not a readable gzip file (it is damaged or cut short)"


def unpacks_too_large(limit: int) -> str:
    return f"unpacks to more than {size_text(limit)}; files over {size_text(limit)} unpacked are left out"


@contextmanager
def gunzipped(file: BinaryIO, limit: int = MAX_BYTES) -> Iterator[BinaryIO]:
    """The open gzip `file`, unpacked as it is read; Unreadable when it does not begin as gzip
    does, when it unpacks to more than `limit` (said once the byte past it is unpacked: the size
    its trailer gives is modulo 4 GB, only the last member's, and any 4 bytes in a file cut
    short), or when it turns out damaged or cut short."""
    try:
        head = file.read(2)
        file.seek(0)
    except OSError as exc:
        raise Unreadable(os_sentence(exc)) from None
    if head != b"\x1f\x8b":
        raise Unreadable(DAMAGED)
    with gzip.GzipFile(fileobj=file, mode="rb") as unpacking:
        yield cast(BinaryIO, _Unpacked(unpacking, limit))


class _Unpacked(io.BufferedIOBase):
    """What a GzipFile gives, counted against the limit, its errors made sentences."""

    def __init__(self, unpacking: gzip.GzipFile, limit: int) -> None:
        super().__init__()
        self._unpacking = unpacking
        self._limit = limit
        self._given = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self._limit + 1 - self._given  # never more than one byte past the limit
        try:
            data = self._unpacking.read(min(size, self._limit + 1 - self._given))
        except (gzip.BadGzipFile, EOFError, zlib.error):
            raise Unreadable(DAMAGED) from None
        except OSError as exc:
            raise Unreadable(os_sentence(exc)) from None
        self._given += len(data)
        if self._given > self._limit:
            raise Unreadable(unpacks_too_large(self._limit))
        return data
