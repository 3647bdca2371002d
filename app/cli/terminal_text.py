"""Untrusted text (stored messages, model file headers, Hub names) made safe to print on a
terminal: control characters are shown as visible escapes instead of being obeyed.

A reply or a pasted prompt may hold terminal escape sequences (ESC ] 0 ; title BEL retitles
the window, ESC [ 2 J clears the screen, some terminals do worse). On a terminal each of
these characters is written as readable text:

| characters                                   | shown as          |
|----------------------------------------------|-------------------|
| C0 controls except newline and tab, DEL      | `\\x1b`, `\\x07`, `\\r`, `\\x7f` ... |
| C1 controls U+0080 to U+009F                 | `\\x9b` ...        |
| bidi embeddings, overrides and isolates      | `\\u202e` ...      |
| (U+202A to U+202E, U+2066 to U+2069)         |                   |

`\\r` is the only short form; every other character is `\\x` + two hex digits below U+0100,
else `\\u` + four. Newlines and tabs stay as they are. A backslash already in the text is
not doubled, so the result is for reading, not for decoding back.

The table is app/visible_text.py's `CONTROLS`, the rule a window follows too (with more
characters). Anything that is not a terminal (a pipe, a file) gets the exact text. JSON on a
terminal gets JSON's own `\\uXXXX` escapes for these characters, so it still decodes to the exact
text.
"""

from __future__ import annotations

from typing import Any, TextIO

from app.cli.output import print_json
from app.visible_text import CONTROLS, json_table, visible_table

# The characters and how each is written come from the one rule for untrusted text (app/visible_text.py).
_VISIBLE: dict[int, str] = visible_table(CONTROLS)
_JSON: dict[int, str] = json_table(CONTROLS)


def escape_controls(text: str) -> str:
    """`text` with every control character listed in the module docstring shown as an escape."""
    return text.translate(_VISIBLE)


def is_terminal(out: TextIO) -> bool:
    """Whether `out` is a terminal (a stream without `isatty` counts as not one)."""
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def for_terminal(text: str, out: TextIO) -> str:
    """`text` escaped when it goes to a terminal, else unchanged."""
    return escape_controls(text) if is_terminal(out) else text


def json_for_terminal(text: str, out: TextIO) -> str:
    """JSON text with the control characters JSON leaves raw escaped, when it goes to a terminal."""
    return text.translate(_JSON) if is_terminal(out) else text


def say(text: str, out: TextIO) -> None:
    """Print one line of untrusted text to `out`, escaped when `out` is a terminal."""
    print(for_terminal(text, out), file=out)


class _JsonEscaping:
    """A write-only stream that escapes what JSON leaves raw before passing it on."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        return self._out.write(text.translate(_JSON))


def print_json_for(obj: Any, out: TextIO) -> None:
    """`print_json`, with C1 and bidi characters as `\\uXXXX` escapes when `out` is a terminal."""
    print_json(obj, _JsonEscaping(out) if is_terminal(out) else out)  # type: ignore[arg-type]
