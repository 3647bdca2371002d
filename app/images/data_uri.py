"""Inline image data from the HTTP APIs turned into bytes: an OpenAI `image_url` (chat parts and
Responses `input_image`), which must be a base64 data: URI, and an Anthropic base64 `source`.
Cove never fetches an image: a link of any scheme is refused with a sentence.

The media type a request declares is only a hint: check_image (app/images/checks.py) decides what
an image is by its content. The size is checked on the base64 text, before it is decoded."""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import unquote, urlsplit

from app.images import checks

# The media types an Anthropic `source` may declare.
MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
_WHITESPACE = " \t\r\n\f\v"
_HOST = re.compile(r"[A-Za-z0-9.\-_\[\]:]{1,80}")
_TAKES = "Cove takes images as data only (a data: URI or base64) and never fetches one"


class ImageSourceRefused(ValueError):
    """Image data that cannot be read from a request (a link, bad base64, too long); the message
    is one sentence that names it."""


def image_bytes_from_url(url: str, *, label: str) -> tuple[bytes, str | None]:
    """The bytes of a `data:[<media type>][;param]*;base64,<data>` URI and its declared media type
    (lowercased; None when absent). The media type, when given, is image/*."""
    name = checks.printable(label)
    text = url.strip()
    if text[:5].lower() != "data:":
        raise ImageSourceRefused(_not_data(text, name))
    header, comma, payload = text[5:].partition(",")
    if not comma:
        raise ImageSourceRefused(f"{name} is not a valid data: URI (there is no comma before the data)")
    params = [p.strip() for p in header.split(";")]
    if params[-1].lower() != "base64" or len(params) < 2:
        raise ImageSourceRefused(f"{name} is a data: URI without base64; {_TAKES}")
    media_type = params[0].lower() or None
    if media_type is not None and not media_type.startswith("image/"):
        raise ImageSourceRefused(f"{name} is a data: URI of {checks.printable(media_type)[:80]}, not of an image")
    if "%" in payload:  # RFC 2397 allows the data to be percent-encoded ("%2B" is 3 characters for 1)
        _check_length(payload, name, encoded=3)
        payload = unquote(payload)
    return _decode(payload, name), media_type


def image_bytes_from_base64(data: str, media_type: str | None, *, label: str) -> bytes:
    """The bytes of an Anthropic `source: {type: base64, media_type, data}`: strict base64 (line
    breaks and spaces allowed), `media_type` one of MEDIA_TYPES when given."""
    name = checks.printable(label)
    if media_type is not None and media_type.strip().lower() not in MEDIA_TYPES:
        given = checks.printable(str(media_type))[:80] or "empty"
        raise ImageSourceRefused(f"{name} has media type {given}; Cove takes image/png, image/jpeg, image/webp or image/gif")
    return _decode(data, name)


def _decode(text: str, name: str) -> bytes:
    """Strict base64 (the alphabet and its padding; whitespace between is dropped), refused when it
    encodes more than MAX_BYTES, before it is decoded."""
    _check_length(text, name)
    compact = text.translate({ord(c): None for c in _WHITESPACE})
    if not compact:
        raise ImageSourceRefused(f"{name} has no data")
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ImageSourceRefused(f"{name} is not valid base64") from None


def _check_length(text: str, name: str, *, encoded: int = 1) -> None:
    """Refuse base64 text longer than MAX_BYTES encodes to (whitespace not counted; nothing copied);
    `encoded` characters of the text may stand for one of base64."""
    longest = 4 * ((checks.MAX_BYTES + 2) // 3) * encoded
    if len(text) <= longest:
        return
    length = len(text) - sum(text.count(c) for c in _WHITESPACE)
    if length > longest:
        tail = text[-8:].rstrip(_WHITESPACE)
        padding = min(2, len(tail) - len(tail.rstrip("=")))
        raise ImageSourceRefused(checks.too_large(name, length // encoded * 3 // 4 - padding))


def _not_data(text: str, name: str) -> str:
    """The sentence for a URL that is not a data: URI: its scheme and host only, never its path."""
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
    except ValueError:
        return f"{name} is not a data: URI; {_TAKES}"
    if not parts.scheme:
        return f"{name} is not a data: URI; {_TAKES}"
    host = host if _HOST.fullmatch(host) else ("…" if host else "")
    if parts.netloc or text[len(parts.scheme) + 1 :].startswith("//"):
        shown = f"{parts.scheme}://{host}" + ("/…" if parts.path or parts.query or parts.fragment else "")
    else:
        shown = f"{parts.scheme}:…"
    return f"{name} is a link ({shown}): {_TAKES}"
