"""JSON Schema keywords no grammar Cove builds can keep a reply to, and that app/tools/check.py does
not check afterwards either: a schema the request asks to be held to (a JSON format, or a tool
marked `strict`) that uses one is a 400 naming the keyword, before anything is generated, as
OpenAI's structured outputs refuse what they do not support. llama-server converts such a schema
and drops the keyword silently; Cove does the same for a tool not marked strict (its calls are
not held to the schema, and a call that breaks it goes back as written: app/tools/reply.py)."""

from __future__ import annotations

from typing import Any

from app.serve.http.errors import ApiError

# Kept to what the converter (app/engine/grammar.py, llama.cpp's json-schema-to-grammar) drops:
# an entry goes once the grammar enforces it.
UNENFORCED = (
    "multipleOf",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "patternProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "minProperties",
    "maxProperties",
)
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def unenforced(schema: Any, where: str = "") -> tuple[str, str] | None:
    """(the first keyword of UNENFORCED in `schema`, where it is), or None. A property or definition
    named like a keyword is a name, not a keyword."""
    if not isinstance(schema, dict):
        return None
    for keyword in UNENFORCED:
        if keyword in schema:
            return keyword, where
    for key in _SUBSCHEMA_MAPS:
        for name, sub in (schema.get(key) or {}).items() if isinstance(schema.get(key), dict) else ():
            found = unenforced(sub, f"{where}.{key}.{name}" if where else f"{key}.{name}")
            if found:
                return found
    for key in _SUBSCHEMA_LISTS:
        for i, sub in enumerate(schema.get(key) or []) if isinstance(schema.get(key), list) else ():
            found = unenforced(sub, f"{where}.{key}[{i}]" if where else f"{key}[{i}]")
            if found:
                return found
    for key in ("items", "additionalProperties"):
        found = unenforced(schema.get(key), f"{where}.{key}" if where else key)
        if found:
            return found
    return None


def refuse_unenforced(schema: Any, field: str, param: str) -> None:
    """Raise a 400 naming the keyword when `schema` (the request's `field`) uses one Cove cannot hold a reply to."""
    found = unenforced(schema)
    if found:
        keyword, where = found
        at = f" (at {where})" if where else ""
        raise ApiError(
            400,
            f"{field}: the keyword '{keyword}'{at} is not supported: Cove's grammar cannot hold a reply to it; leave it out",
            param=param,
        )


def refuse_unenforced_tools(tools: Any, field: str = "tools") -> None:
    """The same for each tool marked `"strict": true`, in any endpoint's shape (chat's `function`
    with `parameters`, Responses' flat `parameters`, Anthropic's `input_schema`)."""
    for i, tool in enumerate(tools) if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        inner: dict[str, Any] = function if isinstance(function, dict) else tool
        if inner.get("strict") is not True:
            continue
        key = "parameters" if "parameters" in inner else "input_schema"
        path = f"{field}[{i}].function.{key}" if inner is not tool else f"{field}[{i}].{key}"
        refuse_unenforced(inner.get(key), path, field)
