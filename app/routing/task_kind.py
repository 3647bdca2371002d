"""What kind of task a request is, and roughly how hard, read cheaply from its text (no model call):
"code" (a fence, code-like lines, or asking for a function, a fix, a script), "math" (a word
problem: several numbers and the words that ask for a quantity), "fact" (a short question asking
what, who, which, where or when), "writing" (a story, an email, a poem, a rewrite), "long" (a long
document pasted in), else "chat". `difficulty` is 0 to 1 from what makes a task longer to get
right: its length, how many numbers and steps it chains, how much code it holds.

Only the person's last message decides the kind; the conversation before it is counted for
"long". These are features, each a reason Auto can say ("code: a function to fix"); whether an
embedding classifier does better is measured against them on bench/auto_tasks.json."""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("code", "math", "fact", "writing", "long", "chat")
LONG_CHARS = 6000  # about 1,500 tokens of pasted text

_FENCE = re.compile(r"```")
_CODE_LINE = re.compile(
    r"^\s*(def |class |import |from \S+ import |return\b|for .+:\s*$|if .+:\s*$|while .+:\s*$|#include|function\b|const |let |var )", re.M
)
_CODE_ASK = re.compile(
    r"\b(python|javascript|typescript|rust|golang|java|c\+\+|sql|regex|function|script|bug|"
    r"refactor|compile|traceback|exception|unit test|implement)\b|`\w+\(",
    re.I,
)
_NUMBER = re.compile(r"(?<![\w.])[-−]?\$?\d[\d,]*(\.\d+)?%?")
_QUANTITY = re.compile(
    r"\b(how (many|much|long|far|old)|total|altogether|in all|left|remain(s|ing)?|each|per|average|sum|difference|"
    r"percent|cost|costs|price|pay|paid|earn|speed|minutes?|hours?|days?|times as|twice|half|ratio|profit|discount|interest)\b",
    re.I,
)
# Words that make even one number a calculation ("the sum of three numbers is 138").
_CALCULATION = re.compile(
    r"\b(sum|product|area|perimeter|volume|percent|ratio|average|increased|decreased|consecutive|largest|smallest|remainder)\b|%",
    re.I,
)
_FACT = re.compile(r"^\s*(what|who|which|where|when|how many|name)\b", re.I)
_WRITING = re.compile(
    r"\b(write|draft|compose|rewrite|rephrase|summari[sz]e|translate)\b.{0,40}\b(story|poem|email|e-mail|letter|essay|post|"
    r"paragraph|speech|song|haiku|review|summary|text|message|description)\b|\b(rewrite|rephrase|summari[sz]e|translate)\b",
    re.I | re.S,
)
_STEPS = re.compile(r"\b(then|after|afterwards|remaining|more than|less than|each|every|of the rest|if)\b", re.I)
# The answer-format sentence a prompt may end with ("Answer briefly.", "Give the final answer as a
# number."): it says nothing of the task, so the kind is read without it.
_FORMAT_TAIL = re.compile(r"(\s*(give|reply|answer|respond|return|put|show)\b[^.?!]*[.!])+\s*$", re.I)


@dataclass(frozen=True)
class TaskKind:
    kind: str  # one of KINDS
    difficulty: float  # 0 (a one-step question) to 1 (long, many steps, much code)
    why: str  # a few words: what in the text said so
    fix: bool = False  # code pasted in with a bug, an error or a fix asked for


def classify(text: str, conversation_chars: int = 0) -> TaskKind:
    """The kind and difficulty of the task `text` (the person's last message) asks for;
    `conversation_chars`: the length of the conversation before it."""
    body = _FORMAT_TAIL.sub("", text or "").strip() or (text or "").strip()
    fix = False
    numbers = len(_NUMBER.findall(body))
    code_lines = len(_CODE_LINE.findall(body))
    words = len(body.split())
    steps = len(_STEPS.findall(body))
    if len(body) + conversation_chars > LONG_CHARS:
        kind, why = "long", f"a long text ({(len(body) + conversation_chars) // 1000}k characters)"
    elif _FENCE.search(body) or code_lines >= 2:
        fix = bool(re.search(r"\b(bug|fix|wrong|error)\b", body, re.I))
        kind, why = "code", "code to fix" if fix else "code in the message"
    elif _CODE_ASK.search(body):
        asked = _CODE_ASK.search(body).group(0).lower()  # type: ignore[union-attr]
        kind, why = "code", "a function to write" if asked.startswith("`") else f"a programming request ({asked})"
    elif (numbers >= 2 and _QUANTITY.search(body)) or (numbers >= 1 and _CALCULATION.search(body)):
        kind, why = "math", f"a word problem ({numbers} number{'s' if numbers != 1 else ''})"
    elif _WRITING.search(body):
        kind, why = "writing", "asks for writing"
    elif _FACT.search(body) and words <= 25:
        kind, why = "fact", "a short question"
    elif numbers >= 2 and re.search(r"\d\s*[-+*/×÷^]\s*\d", body):
        kind, why = "math", "arithmetic"
    else:
        kind, why = "chat", "no task markers"
    difficulty = min(1.0, words / 150 + numbers / 12 + steps / 8 + code_lines / 20)
    return TaskKind(kind, round(difficulty, 2), why, fix=kind == "code" and fix)
