"""JSON schemas within the subset Cove's grammar holds a reply to (docs/STRUCTURED_OUTPUT.md), as a
hypothesis strategy, and the check of a value against one (jsonschema, Draft 2020-12, with the
formats the grammar writes checked too).

`schemas()` draws an object at the root (a tool's parameters must be one) whose values nest
objects (required and optional properties, additionalProperties false or a schema), arrays
(items with minItems/maxItems, prefixItems), strings (minLength/maxLength, format date, time,
date-time and uuid, anchored patterns), integers and numbers with and without bounds, booleans,
null, enum, const, type lists, anyOf, oneOf, allOf and $ref into $defs. Sizes are kept small:
the tiny random model the tests sample writes long strings and many items where it may, so every
string and array is bounded and a reply usually ends within a few hundred tokens.

Left out as outside the subset or unheld by design: `oneOf` whose alternatives overlap (the
grammar writes it as `anyOf`; here each alternative has a type of its own), `allOf` whose parts
share a property name, a pattern's top-level `|`, a self-referencing `$ref`.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import jsonschema
from hypothesis import strategies as st

# Number bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum on "type": "number") are held
# by app/engine/number_range.py. Off: numbers are drawn without bounds.
NUMBER_BOUNDS = True

Schema = dict[str, Any]

NAMES = ["id", "name", "n", "when", "tags", "kind", "ok", "note", "x y", 'q"uote', "back\\slash", "ünï"]
TEXT = st.text(alphabet='abz XY09-_"\\é\u4e2d', min_size=0, max_size=4)  # quotes, backslashes, non-ASCII
SCALARS = st.one_of(TEXT, st.integers(-1000, 1000), st.booleans(), st.none())


def _small_int() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-20, 20), st.integers(-(10**6), 10**6))


@st.composite
def integers(draw: st.DrawFn) -> Schema:
    """An integer, bounded on neither, one or both sides (inclusive or exclusive), never empty."""
    schema: Schema = {"type": "integer"}
    low = draw(st.none() | _small_int())
    high = draw(st.none() | _small_int())
    if low is not None and high is not None and high < low:
        low, high = high, low
    low_exclusive, high_exclusive = draw(st.booleans()), draw(st.booleans())
    if low is not None and high is not None and high - low < 2:
        low_exclusive = high_exclusive = False  # at least one integer stays in range
    if low is not None:
        schema["exclusiveMinimum" if low_exclusive else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if high_exclusive else "maximum"] = high
    return schema


def _bound_value() -> st.SearchStrategy[int | float]:
    return st.one_of(
        st.integers(-50, 50),
        st.builds(
            lambda whole, digits, places: round(whole + digits / 10**places, places),
            st.integers(-50, 50),
            st.integers(0, 999),
            st.integers(1, 3),
        ),
        st.sampled_from([0, 0.5, -0.5, 0.1, 0.3, 1e-3, 1, -1, 2.5, 99.99, 1e6]),
    )


@st.composite
def numbers(draw: st.DrawFn) -> Schema:
    """A number, with bounds as integers or decimals (inclusive or exclusive) when NUMBER_BOUNDS."""
    schema: Schema = {"type": "number"}
    if not NUMBER_BOUNDS:
        return schema
    low = draw(st.none() | _bound_value())
    high = draw(st.none() | _bound_value())
    if low is not None and high is not None:
        if high < low:
            low, high = high, low
        if high == low:
            schema["minimum"] = schema["maximum"] = low  # one value, both inclusive
            return schema
    if low is not None:
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = high
    return schema


@st.composite
def bounded_strings(draw: st.DrawFn) -> Schema:
    high = draw(st.integers(0, 8))
    low = draw(st.integers(0, high))
    schema: Schema = {"type": "string", "maxLength": high}
    if low or draw(st.booleans()):
        schema["minLength"] = low
    return schema


_PATTERN_ATOMS = [
    "a",
    "b",
    "Z",
    "0",
    "-",
    "_",
    " ",
    "é",
    "[a-z]",
    "[A-Z0-9]",
    "[0-9a-f]",
    "[._-]",
    r"\d",
    r"\w",
    r"\s",
    r"\.",
    ".",
    "(ab|cd)",
    "(x|[0-9]{2})",
    "[^@]",
    "[^a-z0-9]",
    '"',
    r"\\",
    '[a"]',
    "(?:q|r)",
]
_QUANTIFIERS = ["", "", "?", "{2}", "{1,3}", "{0,2}", "+", "*"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    """An anchored pattern of literals, classes, shorthands and groups, each maybe repeated."""
    parts = draw(st.lists(st.tuples(st.sampled_from(_PATTERN_ATOMS), st.sampled_from(_QUANTIFIERS)), min_size=1, max_size=4))
    return "^" + "".join(atom + quantifier for atom, quantifier in parts) + "$"


def strings() -> st.SearchStrategy[Schema]:
    return st.one_of(
        bounded_strings(),
        st.sampled_from(["date", "time", "date-time", "uuid"]).map(lambda f: {"type": "string", "format": f}),
        patterns().map(lambda p: {"type": "string", "pattern": p}),
        st.sampled_from(["^[a-z]{1,5}$", "^[A-Z][0-9]{2}$", r"^\d{3}-\d{4}$", "^(yes|no)$"]).map(
            lambda p: {"type": "string", "pattern": p}
        ),
        st.lists(TEXT, min_size=1, max_size=4, unique=True).map(lambda v: {"type": "string", "enum": v}),
    )


def _enum_values() -> st.SearchStrategy[list[Any]]:
    # 1 and true are different values to jsonschema (and to the grammar), but unique_by needs one key.
    return st.lists(SCALARS, min_size=1, max_size=4, unique_by=lambda v: (type(v).__name__, v))


def leaves(refs: tuple[str, ...] = ()) -> st.SearchStrategy[Schema]:
    """A schema with nothing nested in it (or a $ref to one of `refs`)."""
    options = [
        st.just({"type": "boolean"}),
        st.just({"type": "null"}),
        integers(),
        numbers(),
        strings(),
        _enum_values().map(lambda v: {"enum": v}),
        SCALARS.map(lambda v: {"const": v}),
        st.sampled_from([{"type": ["integer", "null"]}, {"type": ["string", "null"], "maxLength": 4}, {"type": ["boolean", "integer"]}]),
    ]
    if refs:
        options.append(st.sampled_from(refs).map(lambda name: {"$ref": f"#/$defs/{name}"}))
    return st.one_of(*options)


@st.composite
def objects(draw: st.DrawFn, values: st.SearchStrategy[Schema], min_size: int = 0) -> Schema:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_size, max_size=4, unique=True))
    properties = {name: draw(values) for name in names}
    required = [name for name in names if draw(st.booleans())]
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    extra = draw(st.sampled_from(["false", "false", "false", "absent", "absent", "schema"]))  # keys run long
    if extra == "false":
        schema["additionalProperties"] = False
    elif extra == "schema":
        schema["additionalProperties"] = draw(
            st.sampled_from([{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "boolean"}, {"enum": ["a", "b"]}])
        )
    if not properties and extra != "schema":
        schema["additionalProperties"] = False  # {} would be any object: long, and not what is tested here
    return schema


@st.composite
def arrays(draw: st.DrawFn, values: st.SearchStrategy[Schema]) -> Schema:
    if draw(st.integers(0, 3)) == 0:
        return {"type": "array", "prefixItems": draw(st.lists(values, min_size=1, max_size=3))}
    low = draw(st.integers(0, 2))
    high = low + draw(st.integers(0, 2))
    return {"type": "array", "items": draw(values), "minItems": low, "maxItems": high}


_ONE_OF_TYPES = {
    "boolean": st.just({"type": "boolean"}),
    "null": st.just({"type": "null"}),
    "integer": integers(),
    "string": st.one_of(bounded_strings(), st.just({"type": "string", "format": "date"})),
    "object": st.just(
        {
            "type": "object",
            "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 5}},
            "required": ["v"],
            "additionalProperties": False,
        }
    ),
    "array": st.builds(lambda n: {"type": "array", "items": {"type": "boolean"}, "minItems": n, "maxItems": n + 1}, st.integers(0, 2)),
}


@st.composite
def one_ofs(draw: st.DrawFn) -> Schema:
    """oneOf whose alternatives are of different types, so a value can match only one."""
    kinds = draw(st.lists(st.sampled_from(sorted(_ONE_OF_TYPES)), min_size=2, max_size=3, unique=True))
    return {"oneOf": [draw(_ONE_OF_TYPES[kind]) for kind in kinds]}


@st.composite
def all_ofs(draw: st.DrawFn, values: st.SearchStrategy[Schema]) -> Schema:
    """allOf of objects whose properties do not share a name (the grammar merges their properties)."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4, unique=True))
    cut = draw(st.integers(1, len(names) - 1))
    parts = []
    for group in (names[:cut], names[cut:]):
        parts.append({"type": "object", "properties": {name: draw(values) for name in group}, "required": group})
    return {"allOf": parts}


def values(refs: tuple[str, ...] = ()) -> st.SearchStrategy[Schema]:
    """Any schema of the subset, nested a few levels at most."""

    def extend(children: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        return st.one_of(
            objects(children),
            arrays(children),
            st.lists(children, min_size=2, max_size=3).map(lambda alts: {"anyOf": alts}),
            one_ofs(),
            all_ofs(children),
        )

    return st.recursive(leaves(refs), extend, max_leaves=6)


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    """An object schema of the subset, maybe with $defs its properties refer to."""
    defs = draw(st.dictionaries(st.sampled_from(["Point", "Tag", "Span"]), values(), max_size=2))
    schema = draw(objects(values(tuple(sorted(defs))), min_size=1))
    if defs:
        schema["$defs"] = defs
    return schema


# jsonschema checks "date" and "uuid" itself; "time" and "date-time" need a package Cove does not
# install (rfc3339-validator), so RFC 3339's own grammar is checked here (and the date parsed).
_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d)")
FORMAT_CHECKER = jsonschema.FormatChecker()
for _name in ("date", "uuid"):
    FORMAT_CHECKER.checkers[_name] = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers[_name]


@FORMAT_CHECKER.checks("time")
def _is_time(value: object) -> bool:
    return not isinstance(value, str) or _TIME.fullmatch(value) is not None


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    day, sep, time = value.partition("T") if "T" in value else value.partition("t")
    datetime.date.fromisoformat(day)
    return bool(sep) and len(day) == 10 and _TIME.fullmatch(time) is not None


def problems(value: Any, schema: Schema) -> list[str]:
    """Every way `value` breaks `schema` (Draft 2020-12, formats checked), as sentences; [] when valid."""
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(value)]


def check_schema(schema: Schema) -> None:
    """The schema itself is a valid Draft 2020-12 schema (a strategy bug otherwise)."""
    jsonschema.Draft202012Validator.check_schema(schema)
