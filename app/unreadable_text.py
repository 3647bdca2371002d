"""Text that cannot be stored or printed as it is, made so with U+FFFD in place of what cannot.

Two ways such text reaches Cove: bytes that are not valid in the locale's encoding (an
argument, standard input), which Python hands over as U+DC80..U+DCFF ("surrogateescape");
and a lone UTF-16 surrogate a server wrote as a JSON escape ("\\ud800"). Neither can be
written to SQLite or to a UTF-8 stream, so each becomes U+FFFD, the rest is kept as it is,
and the caller says once that it happened.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_ESCAPED_BYTES = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # surrogates surrogateescape never makes


def storable(text: str) -> tuple[str, int]:
    """`text` with each lone surrogate replaced by U+FFFD, and how many were replaced."""
    return _LONE_SURROGATE.subn(REPLACEMENT, text)


def from_os(text: str, encoding: str = "utf-8") -> tuple[str, bool]:
    """Text Python decoded with surrogateescape (argv, a stream set so): the bytes that did not
    decode are decoded again with replacement, so a bad sequence becomes one U+FFFD as a
    decoder would make it. Returns the text and whether anything was replaced."""
    if not _LONE_SURROGATE.search(text):
        return text, False
    try:
        data = _NOT_ESCAPED_BYTES.sub(REPLACEMENT, text).encode(encoding, "surrogateescape")
        return data.decode(encoding, "replace"), True
    except (UnicodeError, LookupError):
        return storable(text)[0], True
