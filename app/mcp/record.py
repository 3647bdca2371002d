"""A tool call as an entry of the written record (app/store/request_log.py), chained and
sealed like every other entry. Called on the thread that owns the database."""

from __future__ import annotations

import hashlib
from typing import Any

import sqlite_utils

from app.mcp.approval import Decision, ToolRequest
from app.mcp.results import ToolResult
from app.store.request_log import RequestLog


def record_tool_call(
    db: sqlite_utils.Database,
    request: ToolRequest,
    decision: Decision,
    result: ToolResult,
    client: str = "this machine",
    conversation_id: str | None = None,
) -> int:
    """Append the call; returns the entry's number. Denied calls are entries too."""
    params: dict[str, Any] = {
        "server": request.server.name,
        "server_kind": request.server.kind,
        "server_identity": request.server.identity,
        "tool": request.tool,
        "arguments": request.arguments,
        "approved_by": decision.approved_by,
        "decision": decision.verdict,
        "result_sha256": hashlib.sha256(result.text.encode("utf-8")).hexdigest(),
        "result_cut_from": result.cut_from,
    }
    return RequestLog(db).append(
        client=client,
        remote="",
        endpoint=f"tool:{request.server.name}/{request.tool}",
        model_name="",
        model_sha256=None,
        quant=None,
        params=params,
        messages=[{"role": "tool_call", "name": request.tool, "arguments": request.arguments}],
        reply=result.text,
        status=result.status,
        usage={},
        timings={},
        conversation_id=conversation_id,
    )
