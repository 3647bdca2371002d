"""Cove's grammars are llama.cpp's: the schemas of llama.cpp's own converter tests
(tests/app/engine/data/llama_cpp_schema_cases.json, from tests/test-json-schema-to-grammar.cpp)
are accepted and refused as llama.cpp's Python converter does (but for non-capturing groups,
which Cove takes as llama.cpp's C++ converter does), each grammar is the one that test expects but
for Cove's string characters and the cases of COVE_DIFFERS, and llama.cpp's grammar parser takes
every one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.grammar import schema_grammar
from tests.support.gbnf_regex import gbnf_matcher

pytestmark = pytest.mark.timeout(120)

CASES = json.loads((Path(__file__).parent / "data" / "llama_cpp_schema_cases.json").read_text(encoding="utf-8"))["cases"]
# Upstream's rules for a string's character and a pattern's "." (Cove narrows both; checked in
# test_json_schema_property.py).
UPSTREAM_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})'
UPSTREAM_DOT = r"dot ::= [^\x0A\x0D]"
# Cases whose grammar Cove writes differently on purpose (each checked on its own elsewhere).
COVE_DIFFERS = {
    "max -5": "no leading zero after the minus sign (test_number_range.py, integer ranges)",
    "exotic formats": "dates that exist (test_date_format.py)",
    "regexp quote": 'a quote in a pattern written as JSON writes it, \\" (test_pattern_text.py)',
    **{
        name: "property names outside the schema's hold only JSON string characters (test_schema_property.py)"
        for name in (
            "required + additional props",
            "optional + additional props",
            "required + optional + additional props",
            "optional props with empty name",
            "optional props with nested names",
            "optional props with common prefix",
        )
    },
}
# Cases the Python converter refuses and the C++ one (llama-server's) takes; so does Cove.
AS_CPP = {"regexp with non-capturing group", "regexp with nested non-capturing groups"}
PARSE = (
    "import json, sys, llama_cpp\n"
    "llama_cpp.llama_backend_init()\n"
    "m = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), llama_cpp.llama_model_default_params())\n"
    "v = llama_cpp.llama_model_get_vocab(m)\n"
    "print(json.dumps([bool(llama_cpp.llama_sampler_init_grammar(v, g.encode(), b'root')) for g in json.load(sys.stdin)]))\n"
)


def as_upstream(gbnf: str) -> str:
    gbnf = re.sub(r"^char ::= .*$", lambda _: UPSTREAM_CHAR, gbnf, flags=re.MULTILINE)
    return re.sub(r"^dot ::= .*$", lambda _: UPSTREAM_DOT, gbnf, flags=re.MULTILINE).strip()


def test_llama_cpps_cases_convert_as_llama_cpp_does_and_parse(tiny_gguf: Path) -> None:
    accepted: dict[str, str] = {}
    wrong: list[str] = []
    for case in CASES:
        try:
            accepted[case["name"]] = schema_grammar(case["schema"])
        except ValueError:
            if case["python"] == "accepts":
                wrong.append(f"{case['name']}: refused")
            continue
        if case["python"] == "refuses" and not (case["name"] in AS_CPP and case["cpp"] == "success"):
            wrong.append(f"{case['name']}: accepted")
        elif "python_grammar" in case and (as_upstream(accepted[case["name"]]) == case["python_grammar"]) == (case["name"] in COVE_DIFFERS):
            wrong.append(f"{case['name']}: " + ("llama.cpp's grammar" if case["name"] in COVE_DIFFERS else "not llama.cpp's grammar"))
    assert not wrong, wrong
    assert len(accepted) == sum(case["python"] == "accepts" or case["name"] in AS_CPP for case in CASES) > 60
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(tiny_gguf)],
        input=json.dumps(list(accepted.values())),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-500:]
    parsed = dict(zip(accepted, json.loads(done.stdout.strip().splitlines()[-1]), strict=True))
    assert all(parsed.values()), [name for name, ok in parsed.items() if not ok]


def test_pattern_shorthands_are_classes_and_unknown_escapes_a_sentence(tiny_gguf: Path) -> None:
    """\\d, \\w and \\s become classes llama.cpp parses (upstream wrote them as GBNF escapes, which
    its parser refuses, so the engine failed at the first token); an escape it cannot write is refused."""
    patterns = ["^\\d{3}-\\d{4}$", "^[0-9]{3}\\w$", "^[\\w.-]+@[a-z]+$", "^a\\sb$"]
    gbnfs = [schema_grammar({"type": "string", "pattern": p}) for p in patterns]
    assert "[0-9]" in gbnfs[0] and r"[\x2D-\x2E0-9A-Z\x5Fa-z]" in gbnfs[2]  # [\w.-] (test_pattern_text.py)
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(tiny_gguf)], input=json.dumps(gbnfs), capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1]) == [True] * 4, done.stderr[-500:]
    with pytest.raises(ValueError, match=r"Unsupported escape"):
        schema_grammar({"type": "string", "pattern": "^\\p{L}+$"})


def test_odd_bounds_and_odd_property_names_make_grammars_llama_cpp_parses(tiny_gguf: Path) -> None:
    """Fractional integer bounds are rounded inwards, a boolean one (draft 4) is no bound, and the
    classes written for the keys additionalProperties allows hold "]", "-", "^" and "\\" as themselves."""
    assert schema_grammar({"type": "integer", "minimum": 0.5, "maximum": 3.5}).startswith("root ::= ([1-3]) space")
    assert 'root ::= ("-"? integral-part) space' in schema_grammar({"type": "integer", "exclusiveMinimum": True})
    keys = {
        "type": "object",
        "properties": {"a-]": {"type": "integer"}, "a^\\": {"type": "integer"}, "^b": {"type": "integer"}},
        "additionalProperties": {"type": "integer"},
    }
    gbnf = schema_grammar(keys)
    done = subprocess.run(
        [sys.executable, "-c", PARSE, str(tiny_gguf)], input=json.dumps([gbnf]), capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1]) == [True], (gbnf, done.stderr[-500:])


@pytest.mark.parametrize(
    ("pattern", "takes", "refuses"),
    [
        ("^(?:foo|bar)baz$", ["foobaz", "barbaz"], ["baz", "foobarbaz", "fooba"]),
        ("^(?:(?:ab)+c)?d$", ["d", "abcd", "ababcd"], ["abd", "cd", "abab"]),
    ],
)
def test_a_non_capturing_group_is_a_group(pattern: str, takes: list[str], refuses: list[str]) -> None:
    root = next(line for line in schema_grammar({"type": "string", "pattern": pattern}).splitlines() if line.startswith("root ::= "))
    body = root.removeprefix("root ::= ").removesuffix(" space").removeprefix('"\\"" ').removesuffix(' "\\""')
    rule = gbnf_matcher(body)
    assert [text for text in takes if not rule.fullmatch(text)] == []
    assert [text for text in refuses if rule.fullmatch(text)] == []
