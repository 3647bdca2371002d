"""A turn's documents: the passages retrieved for the person's message from the conversation's
collections, fitted into the context's budget, and written into the prompt with the instruction to
answer from them and cite them as [1], [2]; afterwards, which of them the reply cited.

Runs on the turn's start thread (it opens its own connection to the document index); what it
found (`given`) is read by the history's thread when the reply is written (app/turn/record.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.context_policy import reply_reserve
from app.docs.types import Passage
from app.engine.passage_fit import compose
from app.store.sources import Source

PASSAGES_PER_TURN = 5
# The share of the context (after the reply's reserve) the passages may take; the conversation and
# the message have the rest, and the context policy drops old turns from that rest as it always does.
DOCS_SHARE = 0.5
# Tokens are estimated from UTF-8 bytes: no tokenizer of the model runs in this process. Three bytes a
# token overestimates English for every vocabulary Cove has met (about 4 to 4.5), so passages fitted
# by it fit; text in scripts of 3-byte characters comes out near one token a character, also safe.
BYTES_PER_TOKEN = 3
MIN_CUT_CHARS = 200  # a passage is cut to fit only if this much of it still goes in

INSTRUCTION = (
    "Answer the question below from the numbered passages of the person's documents. "
    "Cite each passage you use by its number in square brackets, like [1] or [2]. "
    "If the passages do not contain the answer, say that the documents do not say, and do not make one up."
)
NOTHING_FOUND = (
    "The person's documents ({names}) were searched for this question and no passage matched. "
    "Say that the documents do not cover it before answering anything else."
)

_CITATION = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


def docs_budget_chars(n_ctx: int, max_tokens: int | None) -> int:
    """How many characters of passages a prompt may carry (an estimate that errs on the safe side)."""
    tokens = int((n_ctx - reply_reserve(max_tokens, n_ctx)) * DOCS_SHARE)
    return max(0, tokens * BYTES_PER_TOKEN)


def fit_passages(passages: Sequence[Passage], budget_chars: int) -> list[Passage]:
    """The best passages whose text fits `budget_chars` (counted as UTF-8 bytes, with their
    labels); the first one that does not fit is cut at a paragraph or sentence end when enough of
    it still goes in, and nothing after it is taken."""
    kept: list[Passage] = []
    used = 0
    for p in passages:
        cost = _cost(p, p.text)
        if used + cost <= budget_chars:
            kept.append(p)
            used += cost
            continue
        room = budget_chars - used - _cost(p, "")
        text = _cut(p.text, room)
        if len(text) >= MIN_CUT_CHARS:
            kept.append(Passage(**{**p.__dict__, "text": text, "end": p.start + len(text)}))
        break
    return kept


def _cost(p: Passage, text: str) -> int:
    return len(_label(0, p).encode()) + len(text.encode()) + 8


def _cut(text: str, room_bytes: int) -> str:
    if room_bytes <= 0:
        return ""
    head = text.encode()[:room_bytes].decode("utf-8", "ignore")
    for mark in ("\n\n", ". ", "\n", " "):
        at = head.rfind(mark)
        if at >= len(head) // 2:
            return head[: at + (1 if mark == ". " else 0)].rstrip()
    return head.rstrip()


def _label(n: int, p: Passage) -> str:
    where = p.where
    return f"[{n}] {Path(p.path).name}" + (f", {where}" if where else "")


def passage_parts(question: str, passages: Sequence[Passage], names: Sequence[str]) -> dict[str, Any]:
    """The person's message as the model reads it, in the parts this machine's engine may fit with
    fewer passages (app/engine/passage_fit.py): the instruction, the numbered passages, the question."""
    return {
        "head": INSTRUCTION + "\n\n",
        "blocks": [f"{_label(i, p)}\n{p.text.strip()}" for i, p in enumerate(passages, 1)],
        "tail": "\n\nQuestion: " + question,
        "none": NOTHING_FOUND.format(names=", ".join(names)),
    }


def prompt_with_passages(question: str, passages: Sequence[Passage], names: Sequence[str]) -> str:
    """The person's message with every passage (what a server's model is sent)."""
    return compose(passage_parts(question, passages, names), len(passages))


def cited_numbers(reply: str, count: int) -> set[int]:
    """The passage numbers (1..count) the reply cites as [n], [n, m] or [n][m]."""
    out: set[int] = set()
    for match in _CITATION.finditer(reply):
        for part in re.split(r"\s*[,;]\s*", match.group(1)):
            n = int(part)
            if 1 <= n <= count:
                out.add(n)
    return out


def sources(passages: Sequence[Passage], reply: str) -> list[Source]:
    """The passages a reply was given, numbered as the prompt numbered them, each marked cited or not."""
    cited = cited_numbers(reply, len(passages))
    return [
        Source(
            n=i,
            collection=p.collection,
            path=p.path,
            start=p.start,
            end=p.end,
            hash=p.hash,
            excerpt=p.text,
            cited=i in cited,
            page=p.page,
            heading=p.heading,
        )
        for i, p in enumerate(passages, 1)
    ]


Search = Callable[[str], list[Passage]]


@dataclass
class TurnDocuments:
    """The documents of one turn: built with the conversation's collections and how to search them,
    applied to the prompt on the turn's thread (`apply`), read back when the reply is written."""

    names: list[str]
    search: Search  # query -> passages, best first (app/docs/search.py behind an open index)
    budget_chars: int
    limit: int = PASSAGES_PER_TURN
    given: list[Passage] = field(default_factory=list)
    problem: str | None = None  # a sentence when the index could not be searched (the reply goes on without)

    def apply(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with the newest user message carrying the passages found for it (and for the
        message before it, when the newest alone finds fewer than `limit`)."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)]
        if not users:
            return messages
        last = users[-1]
        question = messages[last]["content"]
        try:
            found = self.search(question)
            if len(found) < self.limit and len(users) > 1:  # "and the conversation so far": a follow-up question
                earlier = messages[users[-2]]["content"]
                seen = {p.chunk_id for p in found}
                found += [p for p in self.search(earlier + "\n" + question) if p.chunk_id not in seen]
        except Exception as exc:  # noqa: BLE001 - a damaged or busy index: the reply goes on without documents
            self.problem = f"The documents could not be searched ({exc}); this reply was given none."
            return messages
        self.given = fit_passages(found[: self.limit], self.budget_chars)
        out = list(messages)
        out[last] = {
            **messages[last],
            "content": prompt_with_passages(question, self.given, self.names),
            "passages": passage_parts(question, self.given, self.names),
        }
        return out

    def sources(self, reply: str, kept: int | None = None) -> list[Source]:
        """The passages the reply was shown (the first `kept`, when the engine had room for no more)."""
        return sources(self.given if kept is None else self.given[:kept], reply)
