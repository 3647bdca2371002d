"""Tool calls in the conversation: a stored call (history role "tool_call") and its result (role
"tool") shown as ONE row, collapsed to a line ("Called time/get_current_time · ok · allowed once
by the person") and expandable to the arguments and the result in full.

The row is a MessageItem like any other (role "tool_call", its text the line, or the line and
the details as Markdown code blocks), so the delegate lays it out and paints it with the rest;
only its text, its speaker and its one action ("Show details" / "Hide details") come from here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.store.history import Message
from ui.conversation.item_model import MessageItem

TOOL_ROLES = ("tool_call", "tool")
STATUS_WORDS = {
    "ok": "done",
    "tool_error": "the tool reported an error",
    "failed": "failed",
    "denied": "denied",
    "interrupted": "interrupted: its result is unknown",
}
SPEAKER = "Tool"


@dataclass(frozen=True)
class ToolShown:
    """What a tool row shows: its one line, and the details behind it (Markdown)."""

    line: str
    details: str
    expanded: bool = False


def is_tool_row(item: MessageItem) -> bool:
    return item.tool is not None


def tool_line(call: Message | None, result: Message | None) -> str:
    """The collapsed row: what was called, how it ended, who decided."""
    first = call or result
    details: dict[str, Any] = dict(first.params or {}) if first is not None else {}
    name = str(details.get("tool") or details.get("name") or "a tool")
    server = details.get("server")
    what = f"{server}/{name}" if server else name
    if result is None:
        return f"Called {what} · no result"
    status = str(result.params.get("status") or "")
    parts = [f"Called {what}", STATUS_WORDS.get(status, status or "done")]
    who = result.params.get("approved_by")
    if who:
        parts.append(f"decided by {who}")
    elif result.params.get("decision") is None:
        parts.append("nothing ran")
    return " · ".join(parts)


def tool_details(call: Message | None, result: Message | None) -> str:
    """The arguments as pretty JSON and the result, each in full, as Markdown code blocks."""
    arguments = (call.params or {}).get("arguments") if call is not None else None
    if arguments is None and call is not None:
        arguments = {}
    text = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True) if arguments is not None else "(unknown)"
    out = ["**Arguments**", "", _fence(text, "json")]
    if result is not None:
        cut = result.params.get("cut_from")
        heading = "**Result**" + (f" (cut to {len(result.content):,} of {int(cut):,} characters)" if cut else "")
        out += ["", heading, "", _fence(result.content or "(empty)", "")]
    return "\n".join(out)


def _fence(text: str, language: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language}\n{text}\n{ticks}"


def with_expanded(item: MessageItem, expanded: bool) -> MessageItem:
    """The row opened or closed."""
    tool = item.tool
    assert tool is not None
    shown = dataclasses.replace(tool, expanded=expanded)
    content = f"{tool.line}\n\n{tool.details}" if expanded else tool.line
    return dataclasses.replace(item, tool=shown, content=content)


def toggle_tool_row(model: Any, message_id: str) -> None:
    """Open a collapsed tool row of the view's ConversationModel, or close an open one."""
    row = model.row_of(message_id)
    if row >= 0 and model.item(row).tool is not None:
        item = model.item(row)
        model.update_message(with_expanded(item, not item.tool.expanded))


def fold_tool_rows(messages: Sequence[Any], to_item: Callable[[Any], MessageItem]) -> list[MessageItem]:
    """The view's rows for shown messages (each with `.message`): a tool call and the result that
    follows it become one collapsed row; every other message is `to_item(shown)`."""
    out: list[MessageItem] = []
    i = 0
    while i < len(messages):
        shown = messages[i]
        message: Message = shown.message
        if message.role not in TOOL_ROLES:
            out.append(to_item(shown))
            i += 1
            continue
        call = message if message.role == "tool_call" else None
        result = None if call is not None else message
        if call is not None and i + 1 < len(messages):
            following: Message = messages[i + 1].message
            if following.role == "tool" and following.params.get("call_id") == call.params.get("call_id"):
                result = following
                i += 1
        base = to_item(shown)
        tool = ToolShown(tool_line(call, result), tool_details(call, result))
        status = result.status if result is not None else message.status
        item = dataclasses.replace(base, role="tool_call", content=tool.line, tool=tool, status=status, model_name=SPEAKER, metrics={})
        out.append(item)
        i += 1
    return out
