"""Structured output: OpenAI's `response_format` turned into a GBNF grammar (`grammar_for`, run in
the parent), and the engine host's check of a grammar before it constrains sampling with it
(`check_grammar`, run in the host).

The parent never loads llama.cpp's native library for this: llama-cpp-python's JSON-schema
converter (`llama_cpp/llama_grammar.py`, pure Python) is loaded from its file on its own,
without the `llama_cpp` package (whose __init__ loads libllama).

Three things are done to the converter's grammar here. Backslashes in literals are escaped
(`_fix_literals`). Its "char" rule (a character inside a JSON
string) lets raw control characters through, which JSON forbids, and its "dot" (a pattern's ".")
lets through a quote or a backslash that would end the string or escape the next character; both
are narrowed to what upstream llama.cpp's converter allows in a string (`_JSON_SAFE`). And a
grammar whose groups nest deeper than MAX_GRAMMAR_NESTING is refused: the converter writes each
item up to maxItems, each character up to maxLength and each repetition a pattern allows as one
more group inside the last, and llama.cpp's grammar parser recurses once per level (figures in
docs/STRUCTURED_OUTPUT.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from types import ModuleType
from typing import Any

_CONVERTER_NAME = "_cove_llama_grammar"
ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)

# Groups inside one another in one grammar. llama.cpp 0.3.36's parser refuses a grammar from about
# 1,050 levels ("exceeds sane defaults") and overflows its stack, killing the process, from about
# 18,000 (docs/STRUCTURED_OUTPUT.md); 1,000 is refused here, in the parent, with a sentence.
MAX_GRAMMAR_NESTING = 1000
# Any character a JSON string may hold unescaped (RFC 8259: not '"', '\\' or U+0000..U+001F;
# U+007F too, as upstream llama.cpp's converter has it; and no surrogate or value past U+10FFFF, which
# llama.cpp's UTF-8 decoding lets byte tokens make but no UTF-8 text holds).
_JSON_SAFE = r'[^"\\\x7F\x00-\x1F\uD800-\uDFFF\U00110000-\U001FFFFF]'
_CHAR_RULE = re.compile(r'^char ::= \[\^"\\\\\] \|', re.MULTILINE)
_DOT_RULE = re.compile(r"^dot ::= \[\^\\x0A\\x0D\]$", re.MULTILINE)


class GrammarError(ValueError):
    """A grammar llama.cpp's parser refuses; the message is one readable sentence."""


def _fix_literals(module: ModuleType) -> ModuleType:
    """The converter writes a JSON text (an enum's or a const's value, a property's name) as a
    GBNF literal escaping only quotes and line ends, so a backslash in it loses its pair and the
    reply is not the JSON meant; escape backslashes too, as upstream llama.cpp's converter does."""
    setattr(module, "GRAMMAR_LITERAL_ESCAPE_RE", re.compile(r'[\r\n"\\]'))  # noqa: B010
    setattr(module, "GRAMMAR_LITERAL_ESCAPES", {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"})  # noqa: B010
    return module


def _converter() -> ModuleType:
    """llama-cpp-python's llama_grammar module, loaded without its package when it can be."""
    loaded = sys.modules.get(_CONVERTER_NAME) or sys.modules.get("llama_cpp.llama_grammar")
    if loaded is not None:
        return _fix_literals(loaded)
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without running its __init__
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        file_spec = importlib.util.spec_from_file_location(_CONVERTER_NAME, f"{folder}/llama_grammar.py")
        if file_spec is None or file_spec.loader is None:
            continue
        module = importlib.util.module_from_spec(file_spec)
        try:
            file_spec.loader.exec_module(module)
        except OSError:  # no such file here (e.g. a frozen build keeps modules in an archive)
            continue
        sys.modules[_CONVERTER_NAME] = module
        return _fix_literals(module)
    return _fix_literals(importlib.import_module("llama_cpp.llama_grammar"))  # last resort: loads libllama too


_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_PATTERN_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def _oversized(node: Any) -> str | None:
    """A sentence for the first count in a schema past MAX_GRAMMAR_NESTING (minItems, maxItems,
    minLength, maxLength or a pattern's {m,n}); checked before converting, since the converter
    writes out every repetition and a count of a billion would fill the memory first."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in _COUNTS:
                value = item.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_GRAMMAR_NESTING:
                    return (f"the JSON schema's {key} {value:,} is over Cove's limit of {MAX_GRAMMAR_NESTING:,} "
                            "for a constrained reply (llama.cpp's grammar parser cannot take that many repetitions)")
            pattern = item.get("pattern")
            if isinstance(pattern, str):
                for match in _PATTERN_COUNT.finditer(pattern):
                    count = max(int(n) for n in match.groups() if n)
                    if count > MAX_GRAMMAR_NESTING:
                        return (f"the JSON schema's pattern repeats up to {count:,} times ({match.group(0)}), over "
                                f"Cove's limit of {MAX_GRAMMAR_NESTING:,} for a constrained reply (llama.cpp's "
                                "grammar parser cannot take that many repetitions)")
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
        if c in "\"[":
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


def _json_safe(text: str) -> str:
    """The converter's grammar with its string characters narrowed to what JSON allows unescaped."""
    text = _CHAR_RULE.sub(lambda _: f"char ::= {_JSON_SAFE} |", text)
    return _DOT_RULE.sub(lambda _: f"dot ::= {_JSON_SAFE}", text)


def json_grammar() -> str:
    """A grammar for any JSON object (OpenAI's "json_object")."""
    return str(_converter().JSON_GBNF)


def schema_grammar(schema: dict[str, Any]) -> str:
    """A grammar for JSON that matches `schema`. Raises ValueError with a sentence."""
    remote = _remote_refs(schema)
    if remote:
        raise ValueError(f"the JSON schema refers to {remote[0]!r}; only references inside the schema (\"#/...\") are supported")
    oversized = _oversized(schema)
    if oversized:
        raise ValueError(oversized)
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the JSON schema cannot be written as JSON ({exc})") from None
    try:
        grammar = str(_converter().json_schema_to_gbnf(text))
    except RecursionError:
        raise ValueError("the JSON schema is nested too deeply to turn into a grammar") from None
    except Exception as exc:  # the converter asserts or raises on what it does not support
        detail = str(exc) or type(exc).__name__
        raise ValueError(f"the JSON schema cannot be turned into a grammar ({detail[:200]})") from None
    nesting = grammar_nesting(grammar)
    if nesting > MAX_GRAMMAR_NESTING:
        raise ValueError(f"the JSON schema makes a grammar nested {nesting:,} levels deep, over Cove's limit of "
                         f"{MAX_GRAMMAR_NESTING:,}: each item up to maxItems, each character up to maxLength and "
                         "each repetition a pattern allows (as in a{1,5000}) is one level; lower them")
    return _json_safe(grammar)


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
        raise ValueError("response_format must be an object with a \"type\"")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_grammar()
    if kind != "json_schema":
        raise ValueError(f"response_format type {kind!r} is not supported; use \"text\", \"json_object\" or \"json_schema\"")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise ValueError("response_format of type \"json_schema\" needs a \"json_schema\" object")
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
