"""What a turn needs to let its model call tools: the tools of the enabled servers (listed before
the turn), who answers the question for each call, and the host that runs an allowed one.

`ToolLoop.run_call` is called on the thread that drives the turn (the one that owns the
history): it decides (app/mcp/approval.py `decide`: nothing runs without a Decision) and hands
the call and its Decision to the host, which refuses to reach a server without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.mcp.approval import AlwaysRules, Approver, Decision, ToolRequest, decide
from app.mcp.host import McpHost, ToolInfo
from app.mcp.results import ToolResult
from app.mcp.servers import ToolServer
from app.tools.check import schema_problem
from app.tools.parsers import Call

DEFAULT_MAX_STEPS = 8  # model replies with calls in one turn before the turn ends with a sentence


@dataclass(frozen=True)
class OfferedTool:
    """A tool as the model sees it (`name`, unique in the turn) and where it runs."""

    name: str
    server: ToolServer
    info: ToolInfo

    def wire(self) -> dict[str, Any]:
        schema = self.info.input_schema or {"type": "object", "properties": {}}
        return {"type": "function", "function": {"name": self.name, "description": self.info.description,
                                                 "parameters": schema}}


def offered_tools(listed: list[tuple[ToolServer, list[ToolInfo]]]) -> list[OfferedTool]:
    """The tools of several servers under names unique in the turn: a tool's own name, or
    SERVER_TOOL when another server offers a tool of the same name."""
    counts: dict[str, int] = {}
    for _server, tools in listed:
        for info in tools:
            counts[info.name] = counts.get(info.name, 0) + 1
    out = []
    for server, tools in listed:
        for info in tools:
            name = info.name if counts[info.name] == 1 else f"{server.name}_{info.name}"
            out.append(OfferedTool(name, server, info))
    return out


@dataclass(frozen=True)
class CallOutcome:
    """One call the model made, as it ended: the request (None when the model named no tool of
    the turn, or its arguments were refused: nothing ran), the Decision and the result."""

    call: Call
    request: ToolRequest | None
    decision: Decision | None
    result: ToolResult


@dataclass
class ToolLoop:
    """`approver` asks the person (the terminal, a dialog) or is `allow_without_asking` for
    `--allow-tools`; a question that fails or is closed counts as a denial. `first_choice`:
    the first reply's tool_choice ("auto", "required"); later replies are "auto"."""

    host: McpHost
    tools: list[OfferedTool]
    approver: Approver
    rules: AlwaysRules
    who: str = "the person"
    first_choice: str = "auto"
    max_steps: int = DEFAULT_MAX_STEPS
    _by_name: dict[str, OfferedTool] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}

    def wire(self) -> list[dict[str, Any]]:
        return [t.wire() for t in self.tools]

    def find(self, name: str) -> OfferedTool | None:
        return self._by_name.get(name)

    def run_call(self, call: Call) -> CallOutcome:
        """Decide, then run (or not) one call. A call of a tool the turn does not offer, or with
        arguments its schema refuses, runs nothing and goes back to the model as an error."""
        offered = self._by_name.get(call.name)
        if offered is None:
            names = ", ".join(sorted(self._by_name)) or "none"
            return CallOutcome(call, None, None, ToolResult(
                f"There is no tool named '{call.name}' in this conversation (the tools are: {names}); nothing ran.",
                "failed"))
        arguments = json.loads(call.arguments)
        problem = schema_problem(arguments, offered.info.input_schema) if offered.info.input_schema else None
        if problem:
            return CallOutcome(call, None, None, ToolResult(
                f"The call of '{call.name}' does not match its schema ({problem}); nothing ran.", "failed"))
        request = ToolRequest(offered.server, offered.info.name, arguments)
        decision = decide(request, self.approver, self.rules, self.who)
        return CallOutcome(call, request, decision, self.host.call_tool(request, decision))


def assistant_with_calls(content: str, calls: list[Call]) -> dict[str, Any]:
    """A reply with calls as chat templates expect it (OpenAI's shape, arguments as JSON text)."""
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c in calls]}


def tool_message(call: Call, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}
