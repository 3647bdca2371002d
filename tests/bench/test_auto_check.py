"""The task set for issue 53 (bench/auto_tasks.json) and its checker (bench/auto_check.py):
every reference reply passes and every wrong one fails, the set's shape, the number
extractor's edge cases, and code replies that hang, allocate or print without end are failed
without hurting the runner."""

from __future__ import annotations

import collections
import sys

import pytest

from tests.support.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import auto_check  # noqa: E402
from auto_check import check, extract_code, extract_number  # noqa: E402

TASKS = auto_check.load_tasks()
KINDS = {"math", "code", "fact", "writing", "short"}


def fenced(code: str) -> str:
    return f"Here you go:\n\n```python\n{code}\n```\n"


SQUARE = {
    "id": "t-square",
    "kind": "code",
    "prompt": "",
    "check": {"type": "tests", "function": "square", "tests": "assert square(3) == 9\n"},
}


# --- the set -----------------------------------------------------------------------------


def test_shape():
    assert len(TASKS) >= 72
    ids = [t["id"] for t in TASKS]
    assert len(ids) == len(set(ids))
    counts = collections.Counter(t["kind"] for t in TASKS)
    for kind in ("math", "code", "fact"):
        assert counts[kind] >= 20, counts
    for t in TASKS:
        assert t["kind"] in KINDS
        assert t["difficulty"] in ("easy", "medium", "hard")
        assert 0 < len(t["prompt"]) <= 600, t["id"]
        assert t["reference"] and t["wrong"]
        assert {"math": "value", "code": "tests", "fact": "keywords"}[t["kind"]] == t["check"]["type"]
    for kind in ("math", "code", "fact"):
        per = collections.Counter(t["difficulty"] for t in TASKS if t["kind"] == kind)
        assert min(per.values()) >= 6 and len(per) == 3, (kind, per)


def test_code_tasks_name_their_function():
    for t in TASKS:
        if t["kind"] == "code":
            spec = t["check"]
            assert f"`{spec['function']}(" in t["prompt"] or f"def {spec['function']}(" in t["prompt"], t["id"]
            assert 3 <= spec["tests"].count("assert ") <= 6, t["id"]


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_reference_passes_wrong_fails(task):
    ok, reason = check(task, task["reference"])
    assert ok, reason
    ok, reason = check(task, task["wrong"])
    assert not ok, reason


# --- value -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "number"),
    [
        ("The answer is 42.", 42),
        ("The answer is 1,234.", 1234),
        ("Total: 1,234,567.89", 1234567.89),
        ("x = -3.5", -3.5),
        ("It is −7", -7),
        ("5 - 3 = 2", 2),
        ("5-3=2", 2),
        ("$12.50", 12.5),
        ("-$4", -4),
        ("$-4", -4),
        ("That is 12.5%", 12.5),
        ("So .5 of it", 0.5),
        ("**42**", 42),
        ("\\boxed{42}, after step 3", 42),
        ("\\boxed{\\text{1,200}} litres, from 4 tanks", 1200),
        ("\\boxed{\\$28.25}", 28.25),
        ("\\boxed{\\frac{3}{4}}", 0.75),
        ("$$12{,}500$$", 12500),
        ("H2O boils at 100", 100),
        ("two and 3.0", 3),
    ],
)
def test_extract_number(reply, number):
    assert extract_number(reply) == pytest.approx(number)


def test_value_check():
    task = {"check": {"type": "value", "value": 28.25, "tolerance": 0}}
    assert check(task, "$28.25")[0]
    assert check(task, "28.250")[0]
    assert not check(task, "28.2")[0]
    assert check({"check": {"type": "value", "value": 5624.32, "tolerance": 0.01}}, "5,624.33")[0]
    assert not check(task, "no number at all")[0]
    assert not check(task, "")[0]


# --- keywords ----------------------------------------------------------------------------


def test_keywords():
    spec = {"check": {"type": "keywords", "any": [["paris"]]}}
    assert check(spec, "It is PARIS.")[0]
    assert not check(spec, "A Parisian café")[0]
    accents = {"check": {"type": "keywords", "any": [["marquez"], ["gabriel"]]}}
    assert check(accents, "Gabriel García Márquez")[0]
    assert not check(accents, "Márquez")[0]  # every group must match
    assert check({"check": {"type": "keywords", "any": [["ulan bator"]]}}, "Ulan-Bator")[0]
    assert check({"check": {"type": "keywords", "any": [["h2o"]]}}, "H₂O")[0]
    zero = {"check": {"type": "keywords", "any": [["0"]]}}
    assert check(zero, "It is 0 °C.")[0]
    assert not check(zero, "About 0.5 or 10")[0]


# --- tests -------------------------------------------------------------------------------


def test_extract_code_prefers_the_block_defining_the_function():
    reply = "```python\ndef square(x):\n    return x * x\n```\nUsage:\n```python\nprint(square(3))\n```"
    assert "def square" in extract_code(reply, "square")
    assert extract_code("def square(x):\n    return x * x", "square").startswith("def")
    assert extract_code("The answer is to square it.", "square") is None
    assert "def square" in extract_code("```python\ndef square(x):\n    return x * x\n", "square")  # cut off, unclosed


def test_code_checks():
    assert check(SQUARE, fenced("def square(x):\n    return x * x"))[0]
    assert check(SQUARE, "```\ndef square(x):\n    return x ** 2\n```")[0]
    ok, reason = check(SQUARE, "Just multiply it by itself.")
    assert not ok and "no code" in reason
    ok, reason = check(SQUARE, fenced("def cube(x):\n    return x ** 3"))
    assert not ok and "square" in reason
    ok, reason = check(SQUARE, fenced("def square(x):\n    return x *"))
    assert not ok and "SyntaxError" in reason


def test_main_block_does_not_run():
    code = "def square(x):\n    return x * x\n\nif __name__ == '__main__':\n    print(square(int(input())))"
    ok, reason = check(SQUARE, fenced(code))
    assert ok, reason


def test_infinite_loop_is_failed_by_the_timeout():
    ok, reason = check(SQUARE, fenced("def square(x):\n    while True:\n        pass"))
    assert not ok
    assert "timed out" in reason or "SIGXCPU" in reason or "SIGKILL" in reason


def test_sleeping_reply_is_failed_by_the_timeout():
    # A 60 s sleep is cut by the checker's timeout (a reason that says so, not the sleep's end).
    ok, reason = check(SQUARE, fenced("import time\ntime.sleep(60)\n\ndef square(x):\n    return x * x"))
    assert not ok and "timed out" in reason


def test_huge_allocation_fails_without_crashing():
    ok, reason = check(SQUARE, fenced("def square(x):\n    buf = bytearray(4 * 1024 ** 3)\n    return x * x"))
    assert not ok and "MemoryError" in reason
    ok, reason = check(SQUARE, fenced("BIG = [0] * (1024 ** 3)\n\ndef square(x):\n    return x * x"))
    assert not ok and "MemoryError" in reason


def test_output_flood_is_bounded():
    ok, reason = check(SQUARE, fenced("def square(x):\n    while True:\n        print('x' * 10000)"))
    assert not ok


def test_exit_zero_from_the_reply_does_not_pass():
    ok, _ = check(SQUARE, fenced("import sys\n\ndef square(x):\n    return 0\n\nsys.exit(0)"))
    assert not ok


def test_never_raises():
    assert not check(SQUARE, None)[0]
    assert not check({"check": {"type": "nonsense"}}, "x")[0]
    assert not check({}, "x")[0]
    assert not check({"check": {"type": "value"}}, "42")[0]


def test_exit_zero_during_the_tests_does_not_pass():
    ok, reason = check(SQUARE, fenced("import os\n\ndef square(x):\n    os._exit(0)"))
    assert not ok and "before the tests finished" in reason


def test_changing_directory_does_not_fail_a_right_answer():
    ok, reason = check(SQUARE, fenced("import os\nos.chdir('/')\n\ndef square(x):\n    return x * x"))
    assert ok, reason
