"""The errors of reading a model file, apart from the reader (models/gguf_validate.py) so that
the modules that only catch them (the library, the starter, app/core.py) import neither it nor
the `gguf` package (which imports numpy)."""

from __future__ import annotations


class InvalidModelFile(Exception):
    """The file cannot be used as a model. str(exc) is one sentence a non-expert can read."""


class NeedMoreBytes(InvalidModelFile):
    """`read_gguf_header_bytes` ran past the prefix it was given before the header ended.

    `needed` is the smallest prefix length (in bytes) that could get further; the header
    may need more than that. Not a verdict on the file: fetch more and parse again.
    """

    def __init__(self, needed: int, have: int) -> None:
        super().__init__(f"the header is longer than the first {have} bytes that were read")
        self.needed = needed
