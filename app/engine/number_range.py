"""GBNF for a JSON `number` held to `minimum`, `maximum`, `exclusiveMinimum` and `exclusiveMaximum`.

llama.cpp's converters (the Python one vendored as app/engine/schema_to_grammar.py and the C++ one
llama-server uses) bound integers digit by digit but leave a number's bounds to the model
(`"ratio": {"type": "number", "minimum": 0, "maximum": 1}` came back as 379E89732752). This writes
the numbers inside the bounds as decimals without an exponent: the integer part by the vendored
converter's integer-range rules, and the fraction digit by digit against the bound's own digits.

Bounds are read as Python writes them (`repr`, the shortest decimal that is the same double), so
`"exclusiveMinimum": 0.3` keeps out "0.3" itself. A fraction beside a bound's integer part has at
Every number written has at most 15 significant digits (a fraction only as long as its integer
part leaves room for), so two different decimals written here are two different doubles and an
exclusive bound holds once the reply is parsed. For the same reason an open side is held to 15
integer digits (llama.cpp's `integral-part` allows 16).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

SIGNIFICANT_DIGITS = 15  # any decimal of 15 significant digits is a double of its own (DBL_DIG)
INTEGER_CAP = Decimal(10**SIGNIFICANT_DIGITS - 1)

IntRange = Callable[[int | None, int | None, list], None]  # the converter's _generate_min_max_int


class Bound:
    """One side of the range: a value, and whether the value itself is left out."""

    def __init__(self, value: Decimal, exclusive: bool) -> None:
        self.value, self.exclusive = value, exclusive


def _decimal(value: Any) -> Decimal:
    return Decimal(repr(float(value))) if isinstance(value, float) else Decimal(int(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def bounds(schema: dict[str, Any]) -> tuple[Bound | None, Bound | None]:
    """The schema's lower and upper bound (the tighter of minimum and exclusiveMinimum, and of
    maximum and exclusiveMaximum); a bound that is not a finite number is ignored."""
    low = high = None
    for key, exclusive in (("minimum", False), ("exclusiveMinimum", True)):
        if _is_number(schema.get(key)):
            value = _decimal(schema[key])
            if low is None or value > low.value or (value == low.value and exclusive):
                low = Bound(value, exclusive)
    for key, exclusive in (("maximum", False), ("exclusiveMaximum", True)):
        if _is_number(schema.get(key)):
            value = _decimal(schema[key])
            if high is None or value < high.value or (value == high.value and exclusive):
                high = Bound(value, exclusive)
    return low, high


def _fraction_digits(value: Decimal) -> str:
    """The digits after the point of a value >= 0, without trailing zeros ("" for a whole number)."""
    text = format(value - int(value), "f")
    return text.partition(".")[2].rstrip("0")


def _any_digits(low: int, high: int) -> str:
    if high <= 0:
        return ""
    return "[0-9]" if (low, high) == (1, 1) else f"[0-9]{{{low},{high}}}"


def _digit_class(digits: list[int]) -> str:
    first, last = digits[0], digits[-1]
    if last - first + 1 == len(digits):
        return f"[{first}]" if first == last else f"[{first}-{last}]"
    return "[" + "".join(map(str, digits)) + "]"


class _Fraction:
    """The digit strings s (0 to `room` digits) whose value 0.s lies within a lower and an upper
    bound given as digit strings (None: no bound on that side)."""

    def __init__(self, low_excl: bool, high_excl: bool) -> None:
        self.low_excl, self.high_excl = low_excl, high_excl

    def empty_ok(self, low: str | None, high: str | None) -> bool:
        """Whether no more digits (0.s == 0) is within the bounds."""
        return (low is None or (low == "" and not self.low_excl)) and (high is None or high != "" or not self.high_excl)

    def some(self, low: str | None, high: str | None, room: int) -> str | None:
        """GBNF for one to `room` digits within the bounds, or None if none are."""
        if room <= 0:
            return None
        if low == "" and not self.low_excl:
            low = None  # 0.s >= 0 always
        if low is None and high == "" and not self.high_excl:
            return "[0]" if room == 1 else f"[0]{{1,{room}}}"  # 0.s <= 0: zeros only
        if low is None and high is None:
            return "[0-9]" + (f" {_any_digits(0, room - 1)}" if room > 1 else "")
        groups: dict[tuple[str | None, str | None], list[int]] = {}
        for c in range(10):
            after_low: str | None = None
            if low is not None:
                first = int(low[0]) if low else 0
                if c < first:
                    continue
                after_low = low[1:].rstrip("0") if c == first else None
            after_high: str | None = None
            if high is not None:
                first = int(high[0]) if high else 0
                if c > first:
                    continue
                after_high = high[1:].rstrip("0") if c == first else None
            groups.setdefault((after_low, after_high), []).append(c)
        alternatives = []
        for (after_low, after_high), digits in groups.items():
            rest = self.rest(after_low, after_high, room - 1)
            if rest is not None:
                alternatives.append(f"{_digit_class(digits)}{(' ' + rest) if rest else ''}")
        return " | ".join(alternatives) if alternatives else None

    def rest(self, low: str | None, high: str | None, room: int) -> str | None:
        """GBNF for zero to `room` digits within the bounds ("" for exactly none), or None."""
        more = self.some(low, high, room)
        if more is None:
            return "" if self.empty_ok(low, high) else None
        return f"({more})?" if self.empty_ok(low, high) else f"({more})"


def _fraction_part(low: str | None, low_excl: bool, high: str | None, high_excl: bool, room: int) -> str | None:
    """GBNF for what follows an integer part: nothing or "." and digits, within the bounds; None if nothing can."""
    fraction = _Fraction(low_excl, high_excl)
    some = fraction.some(low, high, room)
    if some is None:
        return "" if fraction.empty_ok(low, high) else None
    return f'("." ({some}))?' if fraction.empty_ok(low, high) else f'"." ({some})'


def _room(integer: int) -> int:
    """Fraction digits beside an integer part: 15 significant digits in all."""
    return SIGNIFICANT_DIGITS if integer == 0 else max(0, SIGNIFICANT_DIGITS - len(str(integer)))


def _non_negative(low: Bound, high: Bound | None, int_range: IntRange) -> list[str]:
    """Alternatives for the values v >= 0 within low..high (low.value >= 0), written without a sign."""
    low_int, low_digits = int(low.value), _fraction_digits(low.value)
    out: list[str] = []

    def at(integer: int, part: str | None) -> None:
        if part is not None:
            out.append(f'"{integer}"{(" " + part) if part else ""}')

    def between(first: int, last: int) -> None:
        """Integer parts first..last with any fraction, in bands of one length (each its own room)."""
        for length in range(len(str(first)), len(str(last)) + 1):
            band_first, band_last = max(first, 10 ** (length - 1) if length > 1 else 0), min(last, 10**length - 1)
            if band_first > band_last:
                continue
            rule: list[str] = []
            int_range(band_first, band_last, rule)
            room = _room(band_last)
            fraction = f' ("." {_any_digits(1, room)})?' if room else ""
            out.append(f"({''.join(rule)}){fraction}")

    if high is None:
        at(low_int, _fraction_part(low_digits, low.exclusive, None, False, _room(low_int)))
        between(low_int + 1, max(int(INTEGER_CAP), low_int + 1))
        return out
    high_int, high_digits = int(high.value), _fraction_digits(high.value)
    if low_int == high_int:
        at(low_int, _fraction_part(low_digits, low.exclusive, high_digits, high.exclusive, _room(low_int)))
        return out
    at(low_int, _fraction_part(low_digits, low.exclusive, None, False, _room(low_int)))
    between(low_int + 1, high_int - 1)
    at(high_int, _fraction_part(None, False, high_digits, high.exclusive, _room(high_int)))
    return out


def number_range(low: Bound | None, high: Bound | None, int_range: IntRange) -> str:
    """GBNF (without trailing whitespace) for the JSON numbers within low..high, with no exponent
    and no "-0". Raises ValueError with a sentence when no number is within them."""
    if low is not None and low.value < -INTEGER_CAP and (high is None or high.value > -INTEGER_CAP):
        low = Bound(-INTEGER_CAP, False)  # a subset: still within the schema's bounds
    if high is not None and high.value > INTEGER_CAP and (low is None or low.value < INTEGER_CAP):
        high = Bound(INTEGER_CAP, False)
    low_cap = low if low is not None else Bound(-INTEGER_CAP, False)  # the open side: 15 integer digits
    high_cap = high
    if high_cap is not None and (
        low_cap.value > high_cap.value or (low_cap.value == high_cap.value and (low_cap.exclusive or high_cap.exclusive))
    ):
        raise ValueError("its number bounds leave no number between them")
    alternatives: list[str] = []
    if high_cap is None or high_cap.value > 0 or (high_cap.value == 0 and not high_cap.exclusive):
        zero_up = low_cap if low_cap.value >= 0 else Bound(Decimal(0), False)
        alternatives += _non_negative(zero_up, high_cap, int_range)
    if low_cap.value < 0:
        # -v for v within |high|..|low|, v > 0 (no "-0": zero is written above when it is within).
        if high_cap is not None and high_cap.value < 0:
            magnitude_low = Bound(-high_cap.value, high_cap.exclusive)
        else:
            magnitude_low = Bound(Decimal(0), True)
        magnitude = _non_negative(magnitude_low, Bound(-low_cap.value, low_cap.exclusive), int_range)
        if magnitude:
            alternatives.append('"-" (' + " | ".join(magnitude) + ")")
    if not alternatives:
        raise ValueError("its number bounds leave no number between them")
    return " | ".join(alternatives)
