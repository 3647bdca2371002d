"""Structured output: OpenAI's `response_format` turned into a GBNF grammar (`grammar_for`, run in
the parent), and the engine host's check of a grammar before it constrains sampling with it
(`check_grammar`, run in the host).

The parent never loads llama.cpp's native library for this: llama-cpp-python's JSON-schema
converter (`llama_cpp/llama_grammar.py`, pure Python) is loaded from its file on its own,
without the `llama_cpp` package (whose __init__ loads libllama).
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
_ROOT_RULE = re.compile(r"^\s*root\s*::=", re.MULTILINE)


class GrammarError(ValueError):
    """A grammar llama.cpp's parser refuses; the message is one readable sentence."""


def _converter() -> ModuleType:
    """llama-cpp-python's llama_grammar module, loaded without its package when it can be."""
    loaded = sys.modules.get(_CONVERTER_NAME) or sys.modules.get("llama_cpp.llama_grammar")
    if loaded is not None:
        return loaded
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
        return module
    return importlib.import_module("llama_cpp.llama_grammar")  # last resort: loads libllama too


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


def json_grammar() -> str:
    """A grammar for any JSON object (OpenAI's "json_object")."""
    return str(_converter().JSON_GBNF)


def schema_grammar(schema: dict[str, Any]) -> str:
    """A grammar for JSON that matches `schema`. Raises ValueError with a sentence."""
    remote = _remote_refs(schema)
    if remote:
        raise ValueError(f"the JSON schema refers to {remote[0]!r}; only references inside the schema (\"#/...\") are supported")
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the JSON schema cannot be written as JSON ({exc})") from None
    try:
        return str(_converter().json_schema_to_gbnf(text))
    except RecursionError:
        raise ValueError("the JSON schema is nested too deeply to turn into a grammar") from None
    except Exception as exc:  # the converter asserts or raises on what it does not support
        detail = str(exc) or type(exc).__name__
        raise ValueError(f"the JSON schema cannot be turned into a grammar ({detail[:200]})") from None


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


def check_grammar(vocab: Any, text: str) -> None:
    """Raise GrammarError unless llama.cpp's parser accepts `text` (host side: loads llama_cpp).

    llama-cpp-python adds a grammar to its sampler chain without looking at what
    llama_sampler_init_grammar returned, and a refused grammar returns NULL, which the chain
    would then dereference; so the grammar is parsed once here first.
    """
    if not text.strip():
        raise GrammarError("the grammar is empty")
    if not _ROOT_RULE.search(text):
        raise GrammarError("the grammar has no \"root\" rule (a line \"root ::= ...\")")
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        raise GrammarError("llama.cpp could not parse the grammar (a syntax error, an undefined or left-recursive rule)")
    llama_cpp.llama_sampler_free(sampler)
