"""A call's arguments checked against its tool's schema, for the parts of JSON Schema a tool's
parameters use (type, properties, required, additionalProperties false, enum, const, items,
minimum/maximum, minLength/maxLength): the grammar keeps calls to their schema while it is on,
and this catches a call written while it was not (one whose opener differed from the family's)."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                       "integer": (int,), "number": (int, float), "null": (type(None),)}


def _type_ok(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def schema_problem(value: Any, schema: Any, where: str = "arguments") -> str | None:
    """A sentence for the first way `value` breaks `schema`, or None."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds and not any(_type_ok(value, k) for k in kinds):
        return f"{where} should be of type {'/'.join(kinds)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} should be one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{where} should be {schema['const']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} should be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} should be at most {schema['maximum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} is shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} is longer than {schema['maxLength']} characters"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                return f"{where} lacks the required property {name!r}"
        for name, item in value.items():
            if name in props:
                problem = schema_problem(item, props[name], f"{where}.{name}")
                if problem:
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"{where} has a property {name!r} the schema does not allow"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = schema_problem(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None
