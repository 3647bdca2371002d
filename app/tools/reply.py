"""A finished reply read for tool calls, and a stream's content held back where a call may begin:
what the API endpoints answer with, whatever their shape. A call that breaks the request's tools
(an unknown name, arguments its schema refuses) still goes to the client as the model wrote it, as
OpenAI's and Anthropic's APIs send a call they did not constrain; its problem is kept for the record."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from app.tools.check import schema_problem
from app.tools.families import FAMILIES, Family
from app.tools.parsers import Call, parse_calls, visible
from app.tools.spec import ToolSet


@dataclass(frozen=True)
class ToolReply:
    content: str
    calls: tuple[Call, ...]
    problem: str | None = None  # how a call breaks the request's tools: for the record, the calls go out as written


def family_named(name: str) -> Family:
    return FAMILIES.get(name) or FAMILIES["generic"]


def read_reply(tools: ToolSet, family: Family, text: str) -> ToolReply:
    """The calls in `text` and the rest as content; a reply with no call that parses is all
    content (never nothing). A call of an unknown tool, or with arguments its schema refuses,
    is kept as written, and the first such is the reply's problem; calls past the first when
    parallel calls are off are left out."""
    parsed = parse_calls(family, text, tools.names())
    calls = parsed.calls if tools.choice.parallel else parsed.calls[:1]
    known = {t.name: t for t in tools.tools}
    for call in calls:
        tool = known.get(call.name)
        if tool is None:
            return ToolReply(
                parsed.content,
                calls,
                f"the model called a tool named {call.name!r}, which the request does not have; its output was: {text[:2000]}",
            )
        problem = schema_problem(json.loads(call.arguments), tool.parameters)
        if problem:
            return ToolReply(
                parsed.content,
                calls,
                f"the model's call of {call.name!r} does not match its schema ({problem}); its output was: {text[:2000]}",
            )
    return ToolReply(parsed.content, calls)  # the whole text when no call parsed (gpt-oss: its final channel)


def reply_of(tools: ToolSet, metrics: dict[str, Any], text: str, id_prefix: str = "call_") -> ToolReply:
    """`read_reply` of a finished reply, in the family its engine's metrics name ("tool_format"),
    with call ids that begin with `id_prefix` (Anthropic's are "toolu_...")."""
    reply = read_reply(tools, family_named(str(metrics.get("tool_format") or "")), text)
    if id_prefix == "call_":
        return reply
    calls = tuple(replace(c, id=id_prefix + c.id.removeprefix("call_")) for c in reply.calls)
    return replace(reply, calls=calls)


def record_of(reply: ToolReply) -> dict[str, Any]:
    """What the record keeps of a reply's calls, beside the model's raw output."""
    out: dict[str, Any] = {"tool_calls": [{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments)} for c in reply.calls]}
    if reply.problem:
        out["tool_call_problem"] = reply.problem
    return out


class ContentGate:
    """A stream's content with tools: sent only up to where a call may begin (gpt-oss: only its
    final channel's text), the rest once the reply is read whole. `names`: the tools offered (a
    call of one of them may begin in any form app/tools/openings.py knows)."""

    def __init__(self, family: Family, names: Collection[str] = ()) -> None:
        self.family = family
        self.names = tuple(names)
        self.sent = ""

    def more(self, text: str) -> str:
        """What of `text` (the reply so far) may go out now."""
        shown = visible(self.family, text, self.names, len(self.sent))
        out = shown[len(self.sent) :] if shown.startswith(self.sent) else ""
        self.sent += out
        return out

    def rest(self, reply: ToolReply) -> str:
        """The content not sent yet, once the reply is read."""
        if reply.content.startswith(self.sent):
            return reply.content[len(self.sent) :]
        return ""


def argument_pieces(arguments: str, size: int = 16) -> list[str]:
    """A call's arguments in fragments, as streams send them."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
