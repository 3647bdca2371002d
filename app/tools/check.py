"""A value checked against a JSON schema (a call's arguments against its tool's parameters, a
reply against its response format), with one sentence for the first way it breaks it.

The grammar keeps a reply to its schema while it is on; this catches one written while it was not
(a call whose opener differed from the family's, a tool not marked strict, a reply cut by
max_tokens). The checking is jsonschema's (the schema's own draft, 2020-12 when it names none,
formats checked); the sentences are Cove's, naming where the value breaks the schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator, exceptions, validators

_LONGEST = 200  # characters of jsonschema's own message kept, for a keyword without a sentence here


def _where(where: str, path: Iterable[Any]) -> str:
    return where + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _sentence(error: exceptions.ValidationError, where: str) -> str:
    at = _where(where, error.absolute_path)
    keyword, bound, value = error.validator, error.validator_value, error.instance
    if keyword == "type":
        return f"{at} should be of type {'/'.join(bound) if isinstance(bound, list) else bound}"
    if keyword == "enum":
        return f"{at} should be one of {bound}"
    if keyword == "const":
        return f"{at} should be {bound!r}"
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        phrase = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than", "exclusiveMaximum": "less than"}[keyword]
        return f"{at} should be {phrase} {bound}"
    if keyword in ("minLength", "maxLength"):
        return f"{at} is {'shorter' if keyword == 'minLength' else 'longer'} than {bound} characters"
    if keyword in ("minItems", "maxItems"):
        return f"{at} should have {'at least' if keyword == 'minItems' else 'at most'} {bound} items"
    if keyword == "required" and isinstance(value, dict):
        missing = next((name for name in bound if name not in value), None)
        if missing is not None:
            return f"{at} lacks the required property {missing!r}"
    if keyword == "additionalProperties" and isinstance(value, dict) and bound is False:
        allowed = error.schema.get("properties") or {} if isinstance(error.schema, dict) else {}
        extra = next((name for name in value if name not in allowed), None)
        if extra is not None:
            return f"{at} has a property {extra!r} the schema does not allow"
    if keyword == "pattern":
        return f"{at} does not match the pattern {bound!r}"
    message = error.message if len(error.message) <= _LONGEST else error.message[:_LONGEST] + "…"
    return f"{at}: {message}"


def schema_problem(value: Any, schema: Any, where: str = "arguments") -> str | None:
    """A sentence for the first way `value` breaks `schema` (jsonschema's best match), or None.
    A schema jsonschema cannot use (a broken pattern, a reference it cannot follow, a bound that is
    not a number) gives None: the value cannot be judged by it, and the grammar, where it was on,
    already held the value to what it could."""
    if not isinstance(schema, dict):
        return None
    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        error = exceptions.best_match(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
    except Exception:  # noqa: BLE001 - jsonschema raises many kinds on a schema it cannot use
        return None
    return None if error is None else _sentence(error, where)
