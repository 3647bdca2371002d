"""How much work reading one file may take (time, PDF content unpacked, characters of text), and
the Budget that measures one file's reading against those limits and says, in one sentence,
where the file was cut when it ran out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.docs.readers._base import size_text


@dataclass(frozen=True)
class Limits:
    """The most one file's reading may take. A file that reaches one is cut there: the text before
    it is indexed and the file gets a sentence saying where and why."""

    seconds: float = 120.0  # reading, cutting and writing it (time held for a streaming reply not counted)
    decoded_bytes: int = 64 * 1024**2  # a PDF's page content streams, unpacked, over all its pages
    characters: int = 64_000_000  # text taken from it (about 75,000 passages)


DEFAULT_LIMITS = Limits()


class Cut(Exception):
    """Reading a file stopped at one of its Limits; str(exc) is the sentence for the file list
    ("was cut at page 7 of 20,000: reading it took longer than 2 minutes, ...")."""


class Budget:
    """One file's reading measured against `limits`, from its creation on. One per file, used by
    the thread that reads it."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._start = clock()
        self._paused = 0.0
        self.decoded = 0
        self.characters = 0
        self.cut: str | None = None  # the sentence, once the file was cut (set by whoever caught the Cut)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not counted (the indexer waiting while a reply streams)."""
        began = self._clock()
        try:
            yield
        finally:
            self._paused += self._clock() - began

    def out_of_time(self) -> bool:
        return self._clock() - self._start - self._paused > self.limits.seconds

    def check_time(self, where: str) -> None:
        """Cut when the time is spent. `where` completes "was cut ...": "at page 7 of 20,000"."""
        if self.out_of_time():
            raise self.time_cut(where)

    def time_cut(self, where: str) -> Cut:
        return Cut(cut_sentence(where, f"reading it took longer than {_duration(self.limits.seconds)}, the limit for one file"))

    def take_decoded(self, n: int, where: str) -> None:
        """Count `n` more bytes unpacked; Cut when that passes the limit."""
        self.decoded += n
        if self.decoded > self.limits.decoded_bytes:
            raise Cut(
                cut_sentence(
                    where, f"its pages' content unpacks to more than {size_text(self.limits.decoded_bytes)}, the limit for one file"
                )
            )

    def decoded_left(self) -> int:
        return max(0, self.limits.decoded_bytes - self.decoded)

    def take_text(self, n: int, where: str) -> None:
        """Count `n` more characters of text; Cut (before them) when they would pass the limit."""
        if self.characters + n > self.limits.characters:
            raise Cut(cut_sentence(where, f"it holds more than {self.limits.characters:,} characters of text, the limit for one file"))
        self.characters += n


def cut_sentence(where: str, why: str) -> str:
    """ "was cut at page 7 of 20,000: <why>; what came before is indexed"."""
    if where == AT_START:
        return f"was cut {where}: {why}; none of it is indexed"
    return f"was cut {where}: {why}; what came before is indexed"


AT_START = "at its start"


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return "1 second" if seconds == 1 else f"{seconds:g} seconds"
