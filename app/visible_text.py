"""The one rule for showing text someone else wrote (a model, a tool server, a document) so that it
cannot steer what the person sees: which characters are shown as visible escapes instead of being
obeyed, and how each is written. The terminal (app/cli/terminal_text.py) shows `CONTROLS` this
way; a window, which lays out bidirectional text itself, shows `INVISIBLE`.

| set         | characters                                                                   |
|-------------|------------------------------------------------------------------------------|
| CONTROLS    | C0 controls except newline and tab, DEL, C1 (U+0080 to U+009F), the bidi     |
|             | embeddings and overrides (U+202A to U+202E) and isolates (U+2066 to U+2069)  |
| INVISIBLE   | CONTROLS, and what draws nothing yet changes or hides what is read: the bidi |
|             | marks (U+200E, U+200F, U+061C), soft hyphen, zero width space, line and      |
|             | paragraph separators, word joiner and invisible operators (U+2060 to U+2064),|
|             | U+206A to U+206F, U+FEFF, interlinear annotation (U+FFF9 to U+FFFB) and the  |
|             | tag characters (U+E0000 to U+E007F)                                          |

Each is written `\\r` (the only short form), else `\\x` + two hex digits below U+0100, `\\u` + four
below U+10000, `\\U` + eight above. Newlines and tabs stay as they are. A backslash already in the
text is not doubled, so the result is for reading, not for decoding back. JSON text keeps its
meaning instead: `json_escaped` writes the same characters as JSON's own `\\uXXXX` escapes.
"""

from __future__ import annotations

CONTROLS: tuple[int, ...] = (
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
INVISIBLE: tuple[int, ...] = (
    *CONTROLS,
    0x00AD,
    0x061C,
    0x200B,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x2060, 0x2065),
    *range(0x206A, 0x2070),
    0xFEFF,
    *range(0xFFF9, 0xFFFC),
    *range(0xE0000, 0xE0080),
)


def shown(code: int) -> str:
    """How the character `code` is written when it is shown rather than obeyed."""
    if code == 0x0D:
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def visible_table(codes: tuple[int, ...]) -> dict[int, str]:
    """A `str.translate` table that shows each of `codes`."""
    return {code: shown(code) for code in codes}


def json_table(codes: tuple[int, ...]) -> dict[int, str]:
    """A `str.translate` table that writes each of `codes` but newline and tab as a JSON escape.
    In JSON text these characters can only stand inside strings (json.dumps already escapes C0),
    so the document stays valid and its values exact."""
    return {code: _json_escape(code) for code in codes if code not in (0x09, 0x0A)}


_WINDOW = visible_table(INVISIBLE)
_WINDOW_JSON = json_table(INVISIBLE)


def in_window(text: str) -> str:
    """`text` as a window shows what someone else wrote: each `INVISIBLE` character as an escape."""
    return text.translate(_WINDOW)


def json_in_window(text: str) -> str:
    """JSON text as a window shows it: each `INVISIBLE` character as JSON's escape, so what is shown
    still reads as (and decodes to) exactly the same JSON."""
    return text.translate(_WINDOW_JSON)
