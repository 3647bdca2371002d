"""The task's kind read from its text (app/routing/task_kind.py): every task of bench/auto_tasks.json
(the rules were written against it), and prompts written apart from it, of every kind, in the
shapes people type (no answer-format sentence, a pasted snippet, a long report)."""

from __future__ import annotations

import json

import pytest

from app.routing.task_kind import KINDS, LONG_CHARS, classify
from tests.support.paths import REPO_ROOT

TASKS = json.loads((REPO_ROOT / "bench" / "auto_tasks.json").read_text(encoding="utf-8"))

APART = [
    ("code", "Why does this crash?\n\nfor i in range(len(xs)):\n    if xs[i] > xs[i+1]:\n        swap(xs, i)"),
    ("code", "Can you write a bash script that renames all .jpeg files to .jpg?"),
    ("code", "My SQL query returns duplicates, how do I remove them? SELECT name FROM users JOIN orders ON users.id = orders.user_id"),
    ("code", "Implement a linked list in Rust with push and pop."),
    ("math", "I bought 3 notebooks at $2.40 each and paid with a $10 bill. How much change do I get?"),
    ("math", "A train leaves at 14:05 and arrives at 17:50. How long is the trip?"),
    ("math", "What is 17% of 340?"),
    ("math", "If 5 workers build a wall in 12 days, how many days would 3 workers need?"),
    ("fact", "Who painted the Mona Lisa?"),
    ("fact", "What is the boiling point of water at sea level in Celsius?"),
    ("fact", "Which planet is closest to the sun?"),
    ("fact", "When did the Berlin Wall fall?"),
    ("writing", "Write a short poem about autumn rain."),
    ("writing", "Draft a polite email to my landlord asking to fix the heating."),
    ("writing", "Summarize the plot of Hamlet in three sentences."),
    ("chat", "hi! how are you today?"),
    ("chat", "I feel a bit stressed about my exams, any advice?"),
    ("long", "Please read this report and tell me the key risks:\n" + "The quarterly results show steady growth across regions. " * 150),
]


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_each_task_of_the_set_reads_as_its_kind(task: dict) -> None:
    found = classify(task["prompt"])
    assert found.kind == task["kind"], found
    assert 0.0 <= found.difficulty <= 1.0 and found.why


@pytest.mark.parametrize(("kind", "text"), APART, ids=[f"{k}-{i}" for i, (k, _) in enumerate(APART)])
def test_prompts_written_apart_read_as_their_kind(kind: str, text: str) -> None:
    assert classify(text).kind == kind


def test_harder_tasks_of_the_set_read_as_harder_on_average() -> None:
    def mean(level: str) -> float:
        found = [classify(t["prompt"]).difficulty for t in TASKS if t["difficulty"] == level]
        return sum(found) / len(found)

    assert mean("easy") < mean("medium") < mean("hard")


def test_the_conversation_before_counts_for_a_long_document_and_nothing_is_a_traceback() -> None:
    assert classify("What do you think?", conversation_chars=LONG_CHARS + 1).kind == "long"
    for text in ("", "   ", "\x00\x1b[2J", "?" * 10_000, "12 + 30"):
        assert classify(text).kind in KINDS
