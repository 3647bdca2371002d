"""Auto: the model for one request, among the candidates (app/routing/candidates.py), and why.

First the hard needs: a model that cannot see the request's images, hold its tokens in its
context, or fit in the machine's memory is passed over, with the sentence why; when every model
is, `NoModelCan` says what is missing. A base model (no chat template), a model whose template
does not know tools when the request offers them (its calls are written in Cove's generic format),
or one that does not reason when reasoning is asked for, is chosen only when no other is left.

Then the task (app/routing/task_kind.py): each candidate's cost is the seconds the person would
wait for the reply (loading it if it is not loaded, reading the prompt, writing a reply of the
kind's usual length, at the speeds measured here or estimated from its size), less what a larger
model is worth for this kind of task, in seconds per doubling of its parameters (`WORTH_S`). The
conversation's model pays only for the new message; any other reads the whole conversation again
(the cache-aware part: a long conversation stays where its KV state is). A model the person chose
for this kind before (`preferred`) wins while it can serve the request.

The figures and how WORTH_S was measured: docs/decisions/auto.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.routing.candidates import Candidate, Needs
from app.routing.task_kind import TaskKind, classify

AUTO = "auto"  # the name that asks for Auto, wherever a model is named

# Seconds of waiting a doubling of parameters is worth, per kind: from bench/auto_route.py's per-kind
# accuracy of Qwen2.5-Coder 0.5B against 1.5B (docs/decisions/auto.md).
WORTH_S = {"fact": 12.0, "math": 8.0, "code": 2.0, "fix": 8.0, "writing": 4.0, "long": 4.0, "chat": 1.5}
REPLY_TOKENS = {"fact": 40, "math": 250, "code": 300, "fix": 300, "writing": 350, "long": 250, "chat": 100}
KIND_WORDS = {
    "fact": "a short question",
    "math": "maths",
    "code": "code",
    "fix": "code to fix",
    "writing": "writing",
    "long": "a long text",
    "chat": "chat",
}


class NoModelCan(Exception):
    """No candidate can serve the request: the sentence says what is missing."""


@dataclass(frozen=True)
class AutoChoice:
    model: str
    task: TaskKind
    why: str  # a few words for the reply's line: "maths; qwen-0.5b is faster but weaker at maths"
    passed_over: tuple[tuple[str, str], ...] = field(default=())  # (model, why not) for every other candidate
    expected_s: float = 0.0
    took_ms: float | None = None  # how long choosing took, reading the candidates included (set by the caller)
    able: tuple[str, ...] = field(default=())  # every model that could serve the request, the chosen one included
    holds: str | None = None  # the model whose KV state held the conversation, when one did

    def record(self) -> dict[str, Any]:
        """What the history and the record keep of the choice."""
        return {
            "chosen": self.model,
            "why": self.why,
            "kind": "fix" if self.task.fix else self.task.kind,
            "difficulty": self.task.difficulty,
            "passed_over": [{"model": name, "why": why} for name, why in self.passed_over],
            "able": list(self.able),
            **({"holds": self.holds} if self.holds else {}),
            **({"took_ms": self.took_ms} if self.took_ms is not None else {}),
        }


def is_auto(name: str | None) -> bool:
    return isinstance(name, str) and name.strip().lower() == AUTO


def choose(
    text: str,
    needs: Needs,
    candidates: Sequence[Candidate],
    *,
    holds: str | None = None,
    conversation_tokens: int = 0,
    conversation_chars: int = 0,
    preferred: Mapping[str, str] | None = None,
) -> AutoChoice:
    """The model for a request whose last message is `text`. `holds`: the model whose KV state holds
    the conversation's `conversation_tokens` (its last reply's model); `preferred`: {kind: model}
    the person chose before. Raises NoModelCan."""
    task = classify(text, conversation_chars)
    kind = "fix" if task.fix else task.kind
    able: list[Candidate] = []
    passed: list[tuple[str, str]] = []
    for c in candidates:
        why_not = _cannot(c, needs)
        if why_not is None:
            able.append(c)
        else:
            passed.append((c.name, why_not))
    if not able:
        raise NoModelCan(_none_can(needs, candidates, passed))
    # Ranked lower means after every better one: a chat template, one that knows tools, a model that reasons.
    ranks = (
        (True, lambda c: bool(c.tools), "it is a base model (no chat template)"),
        (needs.tools, lambda c: c.tools == "native", "its template does not know tools"),  # a base model's neither
        (needs.reasoning, lambda c: c.reasons, "it does not reason"),
    )
    could: tuple[str, ...] = ()  # ranked lower or costlier, but able to serve it (a base model only when no other is)
    for asked, better, sentence in ranks:
        if asked and any(better(c) for c in able):
            passed += [(c.name, sentence) for c in able if not better(c)]
            able = [c for c in able if better(c)]
        could = could or tuple(c.name for c in able)
    costs = {c.name: _cost(c, kind, task.difficulty, needs, holds, conversation_tokens) for c in able}
    waits = {c.name: _wait(c, kind, needs, holds, conversation_tokens) for c in able}
    wanted = (preferred or {}).get(kind)
    chosen = next((c for c in able if c.name == wanted), None)
    if chosen is not None:
        why = f"{KIND_WORDS[kind]}; you chose it for {KIND_WORDS[kind]} before"
    else:
        chosen = min(able, key=lambda c: (costs[c.name], -c.params_b, c.name))
        why = _why(chosen, able, kind, holds, waits, _only(passed))
    for c in able:
        if c is not chosen:
            passed.append((c.name, _why_not_chosen(c, chosen, kind, holds, waits)))
    return AutoChoice(chosen.name, task, why, tuple(passed), round(waits[chosen.name], 1), able=could, holds=holds)


def _cannot(c: Candidate, needs: Needs) -> str | None:
    if c.unreachable:
        return c.unreachable
    if needs.images and not c.vision:
        return "cannot see images"
    if needs.tokens + needs.reply > c.context:
        return f"its context of {c.context:,} tokens is smaller than the {needs.tokens + needs.reply:,} this needs"
    if c.memory_needed is not None and c.memory_free is not None and c.memory_needed > c.memory_free:
        return f"needs {c.memory_needed / 2**30:.1f} GiB of memory and {c.memory_free / 2**30:.1f} GiB is free"
    return None


def _none_can(needs: Needs, candidates: Sequence[Candidate], passed: list[tuple[str, str]]) -> str:
    if not candidates:
        return "No model is installed for Auto to choose from; download one from the Models page or with `cove models download`."
    if needs.images and not any(c.vision for c in candidates):
        return "This request has images, and none of your models can see images: install a vision model (one with an mmproj file)."
    reasons = "; ".join(f"{name} {why}" for name, why in passed)
    return f"None of your models can answer this request: {reasons}."


def _tg(c: Candidate) -> float:
    """Tokens a second it writes: measured, else about what 2 cores write at Q4 (bench/auto_route.py:
    0.5B about 2.2 times as fast as 1.5B; writing is bound by reading the weights)."""
    return c.speed.tg or 20.0 / max(c.params_b, 0.05) ** 0.7


def _pp(c: Candidate) -> float:
    return c.speed.pp or 200.0 / max(c.params_b, 0.05) ** 0.9


def _wait(c: Candidate, kind: str, needs: Needs, holds: str | None, conversation_tokens: int) -> float:
    """Seconds until the whole reply: loading, reading what is not cached, writing."""
    reply = min(REPLY_TOKENS[kind], needs.reply) if needs.reply else REPLY_TOKENS[kind]
    to_read = needs.tokens if c.name != holds else max(needs.tokens - conversation_tokens, 0)
    load = 0.0 if c.loaded else 0.5 + 0.3 * c.params_b
    return load + to_read / _pp(c) + reply / _tg(c)


def _cost(c: Candidate, kind: str, difficulty: float, needs: Needs, holds: str | None, conversation_tokens: int) -> float:
    worth = WORTH_S[kind] * (1 + difficulty) * math.log2(max(c.params_b, 0.05) / 0.05)
    return _wait(c, kind, needs, holds, conversation_tokens) - worth


def _only(passed: list[tuple[str, str]]) -> str:
    """What the model left alone is the only one to do, from why the others were passed over."""
    said = {why for _, why in passed}
    for why, only in (
        ("its template does not know tools", "the only model whose template knows tools"),
        ("cannot see images", "the only model that can see images"),
        ("it does not reason", "the only model that reasons"),
        ("it is a base model (no chat template)", "the only model with a chat template"),
    ):
        if why in said:
            return only
    return "the only model that can serve it"


def _why(chosen: Candidate, able: list[Candidate], kind: str, holds: str | None, waits: Mapping[str, float], only: str) -> str:
    head = KIND_WORDS[kind]
    others = [c for c in able if c is not chosen]
    if not others:
        return f"{head}; {only}"
    if holds == chosen.name and any(c.params_b > chosen.params_b for c in others):
        return f"{head}; it holds this conversation, and another model would read it all again"
    stronger = [c for c in others if c.params_b > chosen.params_b]
    faster = [c for c in others if waits[c.name] < waits[chosen.name]]
    if faster:
        rival = min(faster, key=lambda c: waits[c.name])
        return f"{head}; {rival.name} is faster but weaker at {KIND_WORDS[kind]}"
    if stronger:
        rival = max(stronger, key=lambda c: c.params_b)
        ratio = waits[rival.name] / max(waits[chosen.name], 0.01)
        return f"{head}; {rival.name} is stronger but about {ratio:.1f}× slower here"
    return f"{head}; the fastest model for it"


def _why_not_chosen(c: Candidate, chosen: Candidate, kind: str, holds: str | None, waits: Mapping[str, float]) -> str:
    if c.params_b < chosen.params_b:
        if waits[c.name] < waits[chosen.name]:
            return f"faster but weaker at {KIND_WORDS[kind]}"
        return f"weaker at {KIND_WORDS[kind]}, and not faster here"
    if holds == chosen.name:
        return "would read the whole conversation again"
    return f"about {waits[c.name] / max(waits[chosen.name], 0.01):.1f}× slower here for {KIND_WORDS[kind]}"
