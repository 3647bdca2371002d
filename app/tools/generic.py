"""The messages a chat template that knows no tools is given instead (the generic format): the
tools and how to call them described in the system message, earlier calls written out in the
reply's text as the model is asked to write them, and tool results as user turns."""

from __future__ import annotations

import json
from typing import Any

from app.tools.spec import Tool

INSTRUCTIONS = (
    "You can call these tools. To call one, answer with only this, once for each call:\n"
    '<tool_call>\n{{"name": <tool name>, "arguments": <arguments as a JSON object>}}\n</tool_call>\n'
    "The results come back in the next message, inside <tool_response></tool_response>.\n\nTools:\n{tools}"
)


def tools_text(tools: tuple[Tool, ...]) -> str:
    lines = [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}, ensure_ascii=False) for t in tools]
    return INSTRUCTIONS.format(tools="\n".join(lines))


def call_text(call: dict[str, Any]) -> str:
    """A call as the model is asked to write it, and as the generic format's grammar makes it
    write one (app/tools/grammar.py): json.dumps' spacing, so a call re-renders byte for byte.
    Arguments as JSON text (OpenAI's shape) are read first."""
    fn = call.get("function") or {}
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return "<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def generic_messages(messages: list[dict[str, Any]], tools: tuple[Tool, ...] | None) -> list[dict[str, Any]]:
    """`messages` in plain roles and text only: the tools in the system message (when given),
    calls as text, tool results as user turns (consecutive ones joined)."""
    out: list[dict[str, Any]] = []
    if tools:
        first = messages[0] if messages and messages[0].get("role") == "system" else None
        system = (str(first.get("content") or "") + "\n\n" if first else "") + tools_text(tools)
        out.append({"role": "system", "content": system})
        if first is not None:
            messages = messages[1:]
    for m in messages:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "assistant" and m.get("tool_calls"):
            parts = [content] if content else []
            parts += [call_text(c) for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            text = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("tool_result"):
                out[-1]["content"] += "\n" + text
            else:
                out.append({"role": "user", "content": text, "tool_result": True})
        else:
            out.append({"role": role, "content": content})
    for m in out:
        m.pop("tool_result", None)
    return out
