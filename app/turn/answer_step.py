"""The last reply of a tool loop that could not go on: what it is given and how it must begin.

When the model asks again for a call it made before with the same arguments, or for tools after
the turn's last round, the calls do not run (each gets a result saying why) and the model is
asked once more, without tools, to answer from what the tools gave (as LangChain's agents do with
early_stopping_method="generate"). Small models need both halves: Qwen2.5-Coder-0.5B, given the
transcript with its failed attempts, writes the failed call again, or explains the error instead
of answering; given only the calls that worked and no tools, and kept from opening a call, it
answers with what they returned (docs/decisions/real-models.md)."""

from __future__ import annotations

from typing import Any

from app.tools.parsers import Call

# The reply may not begin with what opens a call (a JSON object or list, a code fence), after any
# whitespace; from its first other character on it is free. '<' stays allowed: reasoning opens
# with <think> and gpt-oss with its channel markup. GrammarFirstSampler checks the model's own
# pick first, so a reply that does not begin with a call costs nothing.
NO_CALL_FIRST = r"""root ::= [ \t\r\n]* [^{`\[ \t\r\n] [^\x00]*"""


def repeated_note(name: str) -> str:
    return f"the model asked again for the call of '{name}' it made before with the same arguments; it did not run again"


def limit_note(steps: int) -> str:
    return f"the model asked for tools again after {steps} rounds of calls, the most one turn may have; these calls did not run"


def not_run_result(call: Call, repeated: bool, steps: int) -> str:
    """What the model is told of a call that did not run."""
    if repeated:
        return (
            f"Cove did not run '{call.name}' again: this turn made the same call with the same arguments before, and its result is above."
        )
    return f"Cove did not run '{call.name}': this turn has had {steps} rounds of calls, the most it may have."


ASKED_TO_ANSWER = "; the model was asked to answer from the results without tools"


def answer_messages(sent: list[dict[str, Any]], failed: set[str]) -> list[dict[str, Any]]:
    """The prompt of the answer: `sent` without the calls whose results were errors (`failed`
    holds their ids) and without the replies left with nothing once those are gone. When no
    call worked, every call stays: the errors are all the model has to answer from."""
    called = {c.get("id") for m in sent if m.get("role") == "assistant" for c in m.get("tool_calls") or ()}
    if not called - failed:
        return list(sent)
    out: list[dict[str, Any]] = []
    for message in sent:
        if message.get("role") == "tool" and message.get("tool_call_id") in failed:
            continue
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            kept = [c for c in calls if c.get("id") not in failed]
            if len(kept) != len(calls):
                # The reply as written held the calls left out: the template renders those kept.
                message = {k: v for k, v in message.items() if k != "as_written"}
                message["tool_calls"] = kept
                if not kept:
                    del message["tool_calls"]
                    if not str(message.get("content") or "").strip():
                        continue
        out.append(message)
    return out
