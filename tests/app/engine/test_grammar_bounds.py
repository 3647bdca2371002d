"""Schemas whose grammar would crash llama.cpp's parser (SIGSEGV in the engine) are refused in
the parent with a sentence naming the limit; a grammar at the limit is one llama.cpp takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.grammar import MAX_GRAMMAR_NESTING, grammar_nesting, schema_grammar

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"type": "integer"}, "maxItems": 20000},
        {"type": "string", "maxLength": 200000},
        {"type": "string", "pattern": "^a{1,50000}$"},
        {"type": "object", "properties": {"deep": {"type": "string", "minLength": 10**9}}},
    ],
)
def test_a_schema_past_the_limit_is_a_sentence_naming_it(schema: dict) -> None:
    with pytest.raises(ValueError) as info:
        schema_grammar(schema)
    assert f"{MAX_GRAMMAR_NESTING:,}" in str(info.value) and "limit" in str(info.value)


def test_nesting_counts_groups_not_parentheses_in_literals_or_classes() -> None:
    assert grammar_nesting('root ::= ("a" ("(" [()] )?)? # (((') == 2


def test_a_grammar_at_the_limit_is_one_llama_cpp_parses(tiny_gguf: Path) -> None:
    gbnf = schema_grammar({"type": "array", "items": {"type": "integer"}, "maxItems": MAX_GRAMMAR_NESTING})
    assert grammar_nesting(gbnf) <= MAX_GRAMMAR_NESTING
    code = (
        "import sys, llama_cpp\n"
        "llama_cpp.llama_backend_init()\n"
        "m = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), llama_cpp.llama_model_default_params())\n"
        "s = llama_cpp.llama_sampler_init_grammar(llama_cpp.llama_model_get_vocab(m), sys.stdin.read().encode(), b'root')\n"
        "print('parsed' if s else 'refused')\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tiny_gguf)], input=gbnf, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0 and done.stdout.strip() == "parsed", (done.returncode, done.stdout, done.stderr[-500:])
