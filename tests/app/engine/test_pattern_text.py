"""A pattern's classes and literals are held to the JSON text of the string (app/engine/pattern_class.py):
llama.cpp's converter copied them as written, so `^[^@]+@[^@]+$` let a raw quote end the string
and `^a"b$` wrote one. Each pattern's grammar, turned into a regular expression, takes the JSON
text of a string exactly when the pattern takes the string (within what a JSON string holds),
over every string of one to three characters drawn from a set that holds quotes, backslashes,
line ends and the class edges. (JSON Schema's patterns are ECMA-262's, whose \\w and \\d are ASCII.)"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from app.engine.grammar import schema_grammar
from app.engine.pattern_class import json_class, read_class
from tests.support.gbnf_regex import gbnf_matcher

ALPHABET = ["a", "z", "@", '"', "\\", "\n", "\t", "-", ".", "_", "0", "9", "A", " ", "é", "\x01", "\x7f"]
PATTERNS = [
    "^[^@]{1,3}$",
    '^[a"]+$',
    '^a"b$',
    '^[\\\\"]{1,2}$',
    "^[\\w.-]+$",
    "^\\d\\n[^a-z0-9]$",
    "^[\\x20-\\x7E]{2}$",
    "^(?:[^\\s]|\\.)+$",
    "^[\\^a]+$",
    '^a\\\\"$',
]


def root_rule(pattern: str) -> re.Pattern[str]:
    rules = dict(line.split(" ::= ", 1) for line in schema_grammar({"type": "string", "pattern": pattern}).splitlines() if " ::= " in line)
    body = rules["root"].removeprefix('"\\"" (').removesuffix(') "\\"" space')
    for name in sorted((n for n in rules if n.startswith("root-")), key=len, reverse=True):
        body = re.sub(rf"(?<![\w-]){name}(?![\w-])", lambda _, rule=rules[name]: f"({rule})", body)
    return gbnf_matcher(body)


def holds_plainly(text: str) -> bool:
    """Whether JSON can hold `text` the way the grammar writes it (raw, or \\" \\\\ \\n \\r \\t)."""
    return all(c in '"\\\n\r\t' or (ord(c) >= 0x20 and ord(c) != 0x7F) for c in text)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_grammar_takes_a_strings_json_text_when_the_pattern_takes_the_string(pattern: str) -> None:
    rule = root_rule(pattern)
    wrong = []
    for n in (1, 2, 3):
        for chars in itertools.product(ALPHABET, repeat=n):
            text = "".join(chars)
            written = json.dumps(text, ensure_ascii=False)[1:-1]
            taken = rule.fullmatch(written) is not None
            if taken:
                assert re.fullmatch(pattern, text, re.ASCII) and json.loads(f'"{written}"') == text, (pattern, text)
            elif re.fullmatch(pattern, text, re.ASCII) and holds_plainly(text):
                wrong.append(text)
    assert wrong == [], (pattern, wrong[:5])
    for n in (1, 2, 3):  # raw texts, as a model may write them: taken only when they are a JSON string's text
        for chars in itertools.product(ALPHABET, repeat=n):
            raw = "".join(chars)
            if rule.fullmatch(raw):
                assert re.fullmatch(pattern, json.loads(f'"{raw}"'), re.ASCII), (pattern, raw)


def test_a_class_reads_as_a_regular_expression_reads_it() -> None:
    assert read_class("a-c\\d", "p") == [(0x30, 0x39), (0x61, 0x63)]
    assert read_class("^\\u0000-\\u007F", "p") == [(0x80, 0x10FFFF)]
    with pytest.raises(ValueError, match="no character a JSON string can"):
        json_class("\\x00-\\x08", "p")
    with pytest.raises(ValueError, match="Unsupported escape"):
        json_class("\\p{L}", "p")
