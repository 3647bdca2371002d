"""The prompt of a window or `cove chat` turn: `build_prompt_messages` reads the conversation's
current branch from the history and gives the messages the engine should see (what a reply
that failed or was refused as too long leaves out, a tool call in OpenAI's shape)."""

from __future__ import annotations

import json
from typing import Any

from app.statuses import MessageStatus
from app.store.history import History, Message
from app.store.message_images import request_content

# Earlier replies that still belong in the prompt. Error rows carry no model text worth resending.
_RESENDABLE = {MessageStatus.COMPLETE, MessageStatus.CANCELLED, MessageStatus.LENGTH, MessageStatus.INTERRUPTED}


def build_prompt_messages(history: History, conversation_id: str, system_prompt: str | None, *, upto: str | None = None) -> list[dict]:
    """The conversation as the engine should see it: system prompt, then each kept message of
    the current branch, ending at message `upto` when given (for a regenerated reply)."""
    out: list[dict] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    branch = history.messages(conversation_id)
    owner: dict | None = None  # the reply the next tool call belongs to
    for i, m in enumerate(branch):
        if m.role == "assistant":
            owner = None
            if m.status in _RESENDABLE and m.content:
                owner = {"role": "assistant", "content": m.content}
                if m.reasoning:  # the template decides whether it goes into the prompt
                    owner["reasoning"] = m.reasoning
                out.append(owner)
        elif m.role == "user" and not _refused_as_too_long(branch[i + 1] if i + 1 < len(branch) else None):
            owner = None
            out.append({"role": "user", "content": request_content(m)})  # with its images, when it has any
        elif m.role == "tool_call":
            if owner is None:  # a reply that was only calls
                owner = {"role": "assistant", "content": ""}
                out.append(owner)
            owner.setdefault("tool_calls", []).append(_call_of(m))
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.params.get("call_id"), "name": m.params.get("name"), "content": m.content})
        if upto is not None and m.id == upto:
            break
    return out


def _call_of(m: Message) -> dict[str, Any]:
    """A stored tool call in the shape chat templates expect (OpenAI's, arguments as JSON text)."""
    arguments = json.dumps(m.params.get("arguments") or {}, ensure_ascii=False)
    return {"id": m.params.get("call_id"), "type": "function", "function": {"name": m.params.get("name"), "arguments": arguments}}


def _refused_as_too_long(reply: Message | None) -> bool:
    """The engine (or a server, "remote-context") refused this user message as too long for the
    context: sent again, it would push every earlier turn out of the model's view for the rest of
    the chat, or be refused again."""
    return (
        reply is not None
        and reply.role == "assistant"
        and reply.status == MessageStatus.ERROR
        and reply.metrics.get("error_kind") in ("context", "remote-context")
    )
