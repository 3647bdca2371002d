"""A tool call's outcome as text for the model and the record, capped in size."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_RESULT_CAP = 20_000  # characters
DEFAULT_CALL_TIMEOUT = 60.0  # seconds per call (and for a server to start)


@dataclass(frozen=True)
class ToolLimits:
    """How long one call may take, and how much of a result the model is given."""

    call_timeout_s: float = DEFAULT_CALL_TIMEOUT
    result_cap_chars: int = DEFAULT_RESULT_CAP


@dataclass(frozen=True)
class ToolResult:
    """What goes back to the model. `status`: 'ok', 'tool_error' (the tool said it failed),
    'failed' (the server failed: one sentence in `text`), 'denied', or 'interrupted' (sent, and Cove
    stopped waiting for its answer: app/mcp/failures.py `interrupted`)."""

    text: str
    status: str
    cut_from: int | None = None  # the full length when the text was cut to the cap

    @property
    def is_error(self) -> bool:
        return self.status != "ok"


def result_text(content: list[Any], structured: Any = None) -> str:
    """The text of an MCP result's content blocks; other blocks are described, not inlined."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[a resource: {getattr(resource, 'uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[a link to a resource: {getattr(block, 'uri', '')}]")
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None) or ""
            parts.append(f"[{kind or 'unknown'} content{' ' + mime if mime else ''}, not shown]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


def capped(text: str, status: str, cap: int) -> ToolResult:
    """Cut a text longer than `cap` and tell the model so, in the text it reads."""
    if len(text) <= cap:
        return ToolResult(text=text, status=status)
    note = f"\n[cut by Cove: the tool's result was {len(text)} characters; only the first {cap} are shown]"
    return ToolResult(text=text[:cap] + note, status=status, cut_from=len(text))
