"""Structured output: OpenAI's `response_format` turned into a GBNF grammar (`grammar_for`, run in
the parent), and the engine host's check of a grammar before it constrains sampling with it
(`check_grammar`, run in the host).

Schemas are converted by llama.cpp's own Python converter, vendored as
app/engine/schema_to_grammar.py with Cove's changes marked there (JSON-safe string characters,
escaped literals); the parent never loads llama.cpp's native library for this. Refused here, each
with one sentence: a remote "$ref" (the converter would fetch it), a count (minItems, maxItems,
minLength, maxLength, a pattern's {m,n}) past MAX_GRAMMAR_NESTING, before converting, and a
converted grammar whose groups nest deeper than that (llama.cpp's grammar parser recurses once per
level; the converter nests groups as deep as the schema and its patterns do; figures in
docs/STRUCTURED_OUTPUT.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.engine import schema_to_grammar

ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)

# Groups inside one another in one grammar. llama.cpp 0.3.36's parser refuses a grammar from about
# 1,050 levels ("exceeds sane defaults") and overflows its stack, killing the process, from about
# 18,000 (docs/STRUCTURED_OUTPUT.md); 1,000 is refused here, in the parent, with a sentence.
MAX_GRAMMAR_NESTING = 1000


class GrammarError(ValueError):
    """A grammar llama.cpp's parser refuses; the message is one readable sentence."""


def _convert(schema: dict[str, Any]) -> str:
    """llama.cpp's conversion of `schema` (its command line's defaults: no fetching, "." not
    matching line ends, patterns as JSON strings, properties in the schema's order)."""
    converter = schema_to_grammar.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(schema, ""), "")
    return converter.format_grammar() + "\n"


_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_PATTERN_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def _oversized(node: Any) -> str | None:
    """A sentence for the first count in a schema past MAX_GRAMMAR_NESTING (minItems, maxItems,
    minLength, maxLength or a pattern's {m,n}); checked before converting. llama.cpp's parser
    expands each repetition into rules; past this count it refuses some (maxItems 2,000) and
    sampling under them is not measured (docs/STRUCTURED_OUTPUT.md)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in _COUNTS:
                value = item.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_GRAMMAR_NESTING:
                    return (
                        f"the JSON schema's {key} {value:,} is over Cove's limit of {MAX_GRAMMAR_NESTING:,} "
                        "for a constrained reply (llama.cpp's grammar parser cannot take that many repetitions)"
                    )
            pattern = item.get("pattern")
            if isinstance(pattern, str):
                for match in _PATTERN_COUNT.finditer(pattern):
                    count = max(int(n) for n in match.groups() if n)
                    if count > MAX_GRAMMAR_NESTING:
                        return (
                            f"the JSON schema's pattern repeats up to {count:,} times ({match.group(0)}), over "
                            f"Cove's limit of {MAX_GRAMMAR_NESTING:,} for a constrained reply (llama.cpp's "
                            "grammar parser cannot take that many repetitions)"
                        )
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _remote_refs(node: Any) -> list[str]:
    """Every "$ref" in a schema that does not point inside it (the converter would try to fetch it)."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if ref is not None and not (isinstance(ref, str) and ref.startswith("#")):
                found.append(str(ref))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def grammar_nesting(text: str) -> int:
    """How deep the groups ("(...)") of a GBNF grammar nest, not counting parentheses inside
    literals ("..."), character classes ([...]) or comments."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in '"[':
            end = '"' if c == '"' else "]"
            i += 1
            while i < n and text[i] != end:
                i += 2 if text[i] == "\\" else 1
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest


def json_grammar() -> str:
    """A grammar for any JSON object (OpenAI's "json_object")."""
    return _convert({"type": "object"})


def schema_grammar(schema: dict[str, Any]) -> str:
    """A grammar for JSON that matches `schema`. Raises ValueError with a sentence."""
    remote = _remote_refs(schema)
    if remote:
        raise ValueError(f'the JSON schema refers to {remote[0]!r}; only references inside the schema ("#/...") are supported')
    oversized = _oversized(schema)
    if oversized:
        raise ValueError(oversized)
    try:
        schema = json.loads(json.dumps(schema))  # a copy, which the converter's "$ref" resolving may change
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the JSON schema cannot be written as JSON ({exc})") from None
    try:
        grammar = _convert(schema)
    except RecursionError:
        raise ValueError("the JSON schema is nested too deeply to turn into a grammar") from None
    except Exception as exc:  # the converter asserts or raises on what it does not support
        detail = str(exc) or type(exc).__name__
        raise ValueError(f"the JSON schema cannot be turned into a grammar ({detail[:200]})") from None
    nesting = grammar_nesting(grammar)
    if nesting > MAX_GRAMMAR_NESTING:
        raise ValueError(
            f"the JSON schema makes a grammar nested {nesting:,} levels deep, over Cove's limit of "
            f"{MAX_GRAMMAR_NESTING:,}: each schema inside another and each group inside another in a "
            "pattern is one level; nest them less"
        )
    return grammar


def grammar_for(response_format: object) -> str | None:
    """The GBNF grammar for an OpenAI `response_format`, or None for plain text.

    {"type": "text"} -> None; {"type": "json_object"} -> any JSON object;
    {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}} ->
    JSON matching the schema (always enforced, whatever "strict" says; no schema: any object).
    Raises ValueError with one sentence for anything else (the server answers 400).
    """
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise ValueError('response_format must be an object with a "type"')
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_grammar()
    if kind != "json_schema":
        raise ValueError(f'response_format type {kind!r} is not supported; use "text", "json_object" or "json_schema"')
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise ValueError('response_format of type "json_schema" needs a "json_schema" object')
    name = spec.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError("response_format.json_schema.name must be a string")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ValueError("response_format.json_schema.strict must be true or false")
    schema = spec.get("schema")
    if schema is None:
        return json_grammar()
    if not isinstance(schema, dict):
        raise ValueError("response_format.json_schema.schema must be a JSON schema object")
    return schema_grammar(schema)
