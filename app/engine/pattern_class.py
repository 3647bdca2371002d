"""A pattern's character class (`[a-z]`, `[^@]`, `[\\w.-]`) as GBNF for the JSON text of one
character in it.

llama.cpp's converter copies a class into the grammar as written, and a GBNF class matches the
reply's raw text, not the string JSON makes of it: `^[^@]+$` let a raw quote end the string (or a
control character or a lone backslash break it), and `[a"]` the same. Here the class is read as a
regular expression reads it, the characters a JSON string holds as they are are written as one
positive class (the ranges of the converter's JSON_SAFE_CHAR it keeps: a negated class would also
trip llama.cpp's partial-UTF-8 check), and a quote, a backslash, a line end or a tab in the class
as its JSON escape. Other control characters are left out (the reply stays within the class).
"""

from __future__ import annotations

MAX_CODE = 0x10FFFF
# What a JSON string holds unescaped, as the converter's JSON_SAFE_CHAR.
SAFE = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E), (0x80, 0xD7FF), (0xE000, 0x10FFFF))
# Characters written as their JSON escape (GBNF literal text for it).
ESCAPED = {0x22: r'"\\\""', 0x5C: r'"\\\\"', 0x0A: r'"\\n"', 0x0D: r'"\\r"', 0x09: r'"\\t"'}
SHORTHANDS = {"d": ((0x30, 0x39),), "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), "s": ((0x09, 0x0D), (0x20, 0x20))}
SINGLE_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "0": 0x00}


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, at = [], 0
    for lo, hi in _merge(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CODE:
        out.append((at, MAX_CODE))
    return out


def _intersect(a: list[tuple[int, int]], b: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    return [(max(lo1, lo2), min(hi1, hi2)) for lo1, hi1 in a for lo2, hi2 in b if max(lo1, lo2) <= min(hi1, hi2)]


def read_class(body: str, pattern: str) -> list[tuple[int, int]]:
    """The code points of a regular expression's class body (between "[" and "]"), as ranges."""
    negated = body.startswith("^")
    i = 1 if negated else 0
    ranges: list[tuple[int, int]] = []

    def one() -> tuple[int, int] | tuple[tuple[int, int], ...]:
        """The next item: a code point (as (c, c)) or a shorthand's ranges."""
        nonlocal i
        c = body[i]
        if c != "\\":
            i += 1
            return ord(c), ord(c)
        if i + 1 >= len(body):
            raise ValueError(f"Unbalanced escape in /{pattern}/")
        e = body[i + 1]
        i += 2
        if e in SHORTHANDS:
            return SHORTHANDS[e]
        if e in SINGLE_ESCAPES:
            return SINGLE_ESCAPES[e], SINGLE_ESCAPES[e]
        if e in "xu":
            width = 2 if e == "x" else 4
            digits = body[i : i + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f'Unsupported escape "\\{e}{digits}" in /{pattern}/')
            i += width
            return int(digits, 16), int(digits, 16)
        if e.isalnum():
            raise ValueError(f'Unsupported escape "\\{e}" in /{pattern}/')
        return ord(e), ord(e)

    while i < len(body):
        item = one()
        if isinstance(item[0], tuple):  # a shorthand
            ranges.extend(item)  # type: ignore[arg-type]
            continue
        lo = item[0]
        if i + 1 < len(body) and body[i] == "-":
            i += 1
            end = one()
            if isinstance(end[0], tuple):
                raise ValueError(f"A range cannot end with a shorthand class in /{pattern}/")
            if end[0] < lo:  # type: ignore[operator]
                raise ValueError(f"A range runs backwards in /{pattern}/")
            ranges.append((lo, end[0]))  # type: ignore[arg-type]
        else:
            ranges.append((lo, lo))  # type: ignore[arg-type]
    return _complement(ranges) if negated else _merge(ranges)


def _code(cp: int) -> str:
    if chr(cp).isascii() and chr(cp).isalnum():
        return chr(cp)
    return f"\\x{cp:02X}" if cp < 0x80 else f"\\u{cp:04X}" if cp < 0x10000 else f"\\U{cp:08X}"


def positive_class(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """A GBNF class of code point ranges."""
    return "[" + "".join(_code(lo) if lo == hi else f"{_code(lo)}-{_code(hi)}" for lo, hi in ranges) + "]"


def safe_class(but: str = "") -> str:
    """The class of characters a JSON string holds as they are, less those of `but`."""
    return positive_class(_intersect(_complement([(ord(c), ord(c)) for c in but]), SAFE) if but else SAFE)


def json_class(body: str, pattern: str) -> str:
    """GBNF for the JSON text of one character of the class `[body]`."""
    ranges = read_class(body, pattern)
    plain = _intersect(ranges, SAFE)
    parts = []
    if plain:
        parts.append(positive_class(plain))
    parts += [text for cp, text in ESCAPED.items() if any(lo <= cp <= hi for lo, hi in ranges)]
    if not parts:
        raise ValueError(f"The class [{body}] in /{pattern}/ holds no character a JSON string can")
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"
