"""A number's minimum, maximum, exclusiveMinimum and exclusiveMaximum as a grammar
(app/engine/number_range.py): a text the grammar takes is a JSON number within the bounds once
parsed (as jsonschema reads it), and every plain decimal within them that fits 15 significant
digits is taken. Checked by turning the rule into a regular expression (tests/support/gbnf_regex.py)
over bounds and numbers hypothesis draws, and over the issue's own schema."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine import number_range
from app.engine.grammar import schema_grammar
from app.engine.schema_to_grammar import _generate_min_max_int
from tests.support.gbnf_regex import gbnf_matcher

KEYS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


def matcher(schema: dict):
    return gbnf_matcher(number_range.number_range(*number_range.bounds(schema), _generate_min_max_int))


def canonical(text: str) -> bool:
    """A decimal as JSON writes it, without an exponent: no leading zero, no "-0", digits after a point."""
    whole, point, fraction = text.lstrip("-").partition(".")
    if text.startswith("-") and Decimal(text) == 0:
        return False
    return whole.isdigit() and not (len(whole) > 1 and whole.startswith("0")) and (not point or fraction.isdigit())


def plain_fits(text: str) -> bool:
    """A canonical decimal of at most 15 significant digits."""
    whole, _, fraction = text.lstrip("-").partition(".")
    return canonical(text) and (len(fraction) if whole == "0" else len(whole) + len(fraction)) <= 15


def within(schema: dict, text: str) -> bool:
    value = Decimal(text)
    return all(
        (
            "minimum" not in schema or value >= Decimal(repr(schema["minimum"])),
            "exclusiveMinimum" not in schema or value > Decimal(repr(schema["exclusiveMinimum"])),
            "maximum" not in schema or value <= Decimal(repr(schema["maximum"])),
            "exclusiveMaximum" not in schema or value < Decimal(repr(schema["exclusiveMaximum"])),
        )
    )


def decimals_near(values: list[float]) -> list[str]:
    """Texts at, just inside and just outside each bound, at several lengths, and a few far away."""
    out = {"0", "1", "-1", "0.5", "-0.5", "10", "-10", "123456.789", "-99999"}
    for v in values:
        base = Decimal(repr(v))
        for places in (0, 1, 2, 3, 6, 12, 14):
            step = Decimal(1).scaleb(-places)
            for candidate in (base, base + step, base - step):
                text = format(candidate, "f")
                if "." in text:
                    text = text.rstrip("0").rstrip(".") if places == 0 else text
                out.add(text)
                out.add(format(candidate.quantize(step), "f") if abs(candidate) < 10**12 else text)
    return sorted(out)


bound_values = st.one_of(
    st.integers(-1000, 1000),
    st.decimals(-1000, 1000, places=3).map(float),
    st.sampled_from([0, 0.0, 1e-7, -1e-7, 0.1, 0.3, 2.5, 1e15, -1e20]),
)


@st.composite
def bounded_schemas(draw) -> dict:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    return {"type": "number", **{key: draw(bound_values) for key in keys}}


def nonempty(schema: dict) -> bool:
    try:
        number_range.number_range(*number_range.bounds(schema), _generate_min_max_int)
    except ValueError:
        return False
    return True


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(bounded_schemas(), st.lists(st.decimals(-2000, 2000, places=4, allow_nan=False, allow_infinity=False), max_size=20))
def test_the_grammar_takes_exactly_the_plain_numbers_within_the_bounds(schema: dict, extra: list) -> None:
    if not nonempty(schema):
        low, high = number_range.bounds(schema)
        assert (
            low is not None
            and high is not None
            and (low.value > high.value or (low.value == high.value and (low.exclusive or high.exclusive)))
        ), schema
        return
    rule = matcher(schema)
    texts = decimals_near([schema[k] for k in KEYS if k in schema]) + [format(d, "f") for d in extra]
    for text in texts:
        taken = rule.fullmatch(text) is not None
        if taken:
            jsonschema.validate(json.loads(text), schema)  # within the bounds as a parsed double
            assert canonical(text), (schema, text)
        elif plain_fits(text) and within(schema, text) and abs(Decimal(text)) < 10**15:
            pytest.fail(f"{schema}: {text} is within the bounds but the grammar refuses it")


def test_the_issue_s_ratio_and_hours_come_only_within_bounds() -> None:
    ratio = matcher({"type": "number", "minimum": 0, "maximum": 1})
    for text in ("0", "1", "0.5", "0.999999999999999", "1.0", "1.00000", "0.000000000000001"):
        assert ratio.fullmatch(text), text
    for text in ("379E89732752", "-0", "-0.1", "1.000000000000001", "1.1", "2", "01", "-0.0", "1e0"):
        assert not ratio.fullmatch(text), text


def test_an_exclusive_bound_keeps_its_own_value_out_even_as_a_double() -> None:
    rule = matcher({"type": "number", "exclusiveMinimum": 0.3, "exclusiveMaximum": 2})
    assert not rule.fullmatch("0.3") and not rule.fullmatch("0.30") and not rule.fullmatch("2")
    assert rule.fullmatch("0.300000000000001") and rule.fullmatch("1.99999999999999")
    assert not rule.fullmatch("1.9999999999999999")  # 17 digits: the double 2.0


def test_bounds_that_leave_no_number_are_a_sentence() -> None:
    for schema in ({"type": "number", "minimum": 2, "maximum": 1}, {"type": "number", "exclusiveMinimum": 1, "maximum": 1}):
        with pytest.raises(ValueError, match="leave no number between them"):
            schema_grammar(schema)


def test_a_bound_that_is_not_a_number_is_ignored_as_for_integers() -> None:
    assert schema_grammar({"type": "number", "minimum": True, "maximum": "2"}) == schema_grammar({"type": "number"})


@pytest.mark.parametrize(
    "schema",
    [
        {"maximum": -1},
        {"maximum": -5},
        {"maximum": -10},
        {"maximum": -123},
        {"minimum": -7},
        {"minimum": 15, "maximum": 300},
        {"exclusiveMinimum": -12, "exclusiveMaximum": 207},
    ],
)
def test_an_integer_range_takes_its_integers_as_json_writes_them(schema: dict) -> None:
    """Integer bounds (the converter's own rules): every integer within is taken, written as JSON
    writes it, and nothing else; upstream let "-05" in under a negative maximum with no minimum."""
    root = next(line for line in schema_grammar({"type": "integer", **schema}).splitlines() if line.startswith("root"))
    rule = gbnf_matcher(root.removeprefix("root ::= ").removesuffix(" space"))
    full = {"type": "integer", **schema}
    for n in range(-2000, 2001):
        inside = jsonschema.Draft202012Validator(full).is_valid(n)
        assert (rule.fullmatch(str(n)) is not None) == inside, n
    for text in ("-05", "007", "-0123", "1.0", "1e2"):  # "-0" is JSON, and 0
        assert rule.fullmatch(text) is None, text
