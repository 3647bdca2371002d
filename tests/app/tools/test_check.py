"""Arguments and replies checked against their schema (app/tools/check.py): every keyword the
grammar holds a reply to is checked again afterwards (bounds exclusive or not, items, patterns,
anyOf, references, formats), each break gets one sentence naming where it is, and a schema that
cannot be used for checking judges nothing rather than raising."""

from __future__ import annotations

import pytest

from app.tools.check import schema_problem

TIDE = {
    "type": "object",
    "properties": {
        "port": {"type": "string", "minLength": 2, "maxLength": 8},
        "hours": {"type": "integer", "minimum": 1, "maximum": 48},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    },
    "required": ["port", "hours"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        ({"port": "Brest", "hours": 632260094}, "arguments.hours should be at most 48"),
        ({"port": "Brest", "hours": 0}, "arguments.hours should be at least 1"),
        ({"port": "Brest", "hours": 4, "ratio": 1}, "arguments.ratio should be less than 1"),
        ({"port": "Brest", "hours": 4, "ratio": 0}, "arguments.ratio should be more than 0"),
        ({"port": "Brest", "hours": "4"}, "arguments.hours should be of type integer"),
        ({"port": "Brest"}, "arguments lacks the required property 'hours'"),
        ({"port": "Brest", "hours": 4, "tide": 1}, "arguments has a property 'tide' the schema does not allow"),
        ({"port": "B", "hours": 4}, "arguments.port is shorter than 2 characters"),
        ({"port": "Saint-Malo-de-Guersac", "hours": 4}, "arguments.port is longer than 8 characters"),
    ],
)
def test_each_break_gets_a_sentence_naming_where(value: dict, sentence: str) -> None:
    assert schema_problem(value, TIDE) == sentence


def test_a_value_within_its_schema_has_no_problem() -> None:
    assert schema_problem({"port": "Brest", "hours": 48, "ratio": 0.5}, TIDE) is None


def test_items_patterns_choices_references_and_formats_are_checked() -> None:
    schema = {
        "$defs": {"day": {"type": "string", "format": "date"}},
        "type": "object",
        "properties": {
            "days": {"type": "array", "items": {"$ref": "#/$defs/day"}, "minItems": 1, "maxItems": 2},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "size": {"anyOf": [{"type": "integer"}, {"enum": ["small", "large"]}]},
        },
    }
    assert schema_problem({"days": ["2026-12-06"], "code": "BRE", "size": "small"}, schema) is None
    assert schema_problem({"days": []}, schema) == "arguments.days should have at least 1 items"
    assert schema_problem({"days": ["a", "b", "c"]}, schema) == "arguments.days should have at most 2 items"
    assert schema_problem({"days": ["2026-13-45"]}, schema).startswith("arguments.days[0]: ")
    assert schema_problem({"code": "brest"}, schema) == "arguments.code does not match the pattern '^[A-Z]{3}$'"
    assert schema_problem({"size": "medium"}, schema) is not None


def test_a_long_value_in_a_sentence_is_cut() -> None:
    problem = schema_problem({"size": ["x" * 5000]}, {"properties": {"size": {"not": {"type": "array"}}}})
    assert problem is not None and len(problem) < 300


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "(["},
        {"$ref": "https://example.invalid/schema.json"},
        {"type": "integer", "minimum": "one"},
    ],
)
def test_a_schema_that_cannot_be_used_judges_nothing(schema: dict) -> None:
    assert schema_problem("x" if "pattern" in schema else 3, schema) is None
