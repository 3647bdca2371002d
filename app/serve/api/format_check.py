"""A reply to a JSON format (chat's `response_format`, Responses' `text.format`, Anthropic's
`output_config.format`) checked once it ended. The grammar keeps a reply to its format, but not
past a reply cut by max_tokens, nor to a keyword a non-strict schema may carry that no grammar
holds: such a reply still goes to the client as written, as OpenAI's and Anthropic's APIs send
one, and the sentence made here is kept in the record (`response_format_problem`)."""

from __future__ import annotations

import json
from typing import Any

from app.tools.check import schema_problem


def format_schema(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema a reply to `fmt` must match, in any endpoint's shape: json_object is any
    object, json_schema its schema (chat's under `json_schema`, the others' under `schema`);
    None for plain text."""
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    if fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    schema = inner.get("schema") if isinstance(inner, dict) else fmt.get("schema")
    return schema if isinstance(schema, dict) else {}


def format_problem(schema: dict[str, Any], text: str) -> str | None:
    """A sentence for how `text` breaks `schema` (not JSON, or the first way its value does), or None."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the reply is not JSON ({exc})"
    problem = schema_problem(value, schema, "the reply")
    return f"the reply does not match the response format's schema ({problem})" if problem else None
