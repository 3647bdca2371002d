"""What a turn needs to let its model call tools: the tools of the enabled servers (listed before
the turn), who answers the question for each call, and the host that runs an allowed one.

`ToolLoop.run_call` is called on the thread that drives the turn (the one that owns the
history): it decides (app/mcp/approval.py `decide`: nothing runs without a Decision) and hands
the call and its Decision to the host, which refuses to reach a server without one. A loop
marked `deferred` (the window) is driven in two phases instead (app/turn/tool_step.py): the
question goes out as an event, the answer comes back later, and the call runs on a worker.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.engine.request import ToolOffer
from app.mcp.approval import DENY, AlwaysRules, Approver, Decision, ToolRequest, decide, with_reason
from app.mcp.host import McpHost, ToolInfo
from app.mcp.results import ToolResult
from app.mcp.servers import ToolServer
from app.tools.check import schema_problem
from app.tools.parsers import Call

DEFAULT_MAX_STEPS = 8  # model replies with calls in one turn before the turn ends with a sentence


@dataclass(frozen=True)
class OfferedTool:
    """A tool as the model sees it (`name`, unique in the turn; see `offer`) and where it runs."""

    name: str
    server: ToolServer
    info: ToolInfo

    def wire(self) -> dict[str, Any]:
        schema = self.info.input_schema or {"type": "object", "properties": {}}
        return {"type": "function", "function": {"name": self.name, "description": self.info.description, "parameters": schema}}


# The names MCP gives tools. Anything else (spaces, quotes, line breaks, other scripts) could
# reword the question the person reads or a chat template's markup, so it is not offered.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True)
class Offer:
    """The tools of a turn, each under a name that maps to exactly one (server, tool), and one
    sentence for each tool that is not offered."""

    tools: list[OfferedTool]
    refused: list[str]


def offer(listed: list[tuple[ToolServer, list[ToolInfo]]]) -> Offer:
    """A tool keeps its own name when no other tool of the turn has it (letter case aside) and it
    does not begin with another enabled server's name and '_'; otherwise it is offered as
    SERVER_TOOL. So a server cannot take the name another server's tool is offered under. A name
    that two tools would still share (a server listing one tool twice; server names such as 'a'
    and 'a_b') is offered for neither, and each gets a sentence, as does a name MCP does not allow."""
    refused: list[str] = []
    valid: list[tuple[ToolServer, ToolInfo]] = []
    for server, infos in listed:
        for info in infos:
            if _TOOL_NAME.match(info.name):
                valid.append((server, info))
            else:
                refused.append(
                    f"The tool server '{server.name}' offers a tool named {ascii(info.name[:80])}, which is "
                    "not a tool name (letters, digits, '_', '.' and '-', up to 128): it is not offered."
                )
    own = Counter(info.name.casefold() for _server, info in valid)
    prefixes = {f"{server.name}_".casefold() for server, _tools in listed}
    named: list[tuple[str, ToolServer, ToolInfo]] = []
    for server, info in valid:
        folded = info.name.casefold()
        foreign = any(folded.startswith(prefix) for prefix in prefixes - {f"{server.name}_".casefold()})
        name = info.name if own[folded] == 1 and not foreign else f"{server.name}_{info.name}"
        named.append((name, server, info))
    taken = Counter(name.casefold() for name, _server, _info in named)
    tools: list[OfferedTool] = []
    for name, server, info in named:
        if taken[name.casefold()] == 1:
            tools.append(OfferedTool(name, server, info))
        else:
            refused.append(
                f"The tool '{info.name}' of the tool server '{server.name}' would be offered as '{name}', "
                "a name another tool of this conversation has too: it is not offered."
            )
    return Offer(tools, refused)


def offered_tools(listed: list[tuple[ToolServer, list[ToolInfo]]]) -> list[OfferedTool]:
    """The tools `offer` offers (names unique in the turn, each for one server's tool)."""
    return offer(listed).tools


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
    the first reply's tool_choice ("auto", "required"); later replies are "auto". `deferred`:
    the driver must not block (a window polling its turn): `approver` is not called; each
    question is a ToolCallEvent's `question`, answered with `Turn.answer`."""

    host: McpHost
    tools: list[OfferedTool]
    approver: Approver
    rules: AlwaysRules
    who: str = "the person"
    first_choice: str = "auto"
    max_steps: int = DEFAULT_MAX_STEPS
    deferred: bool = False
    _by_name: dict[str, OfferedTool] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}

    def wire(self) -> list[dict[str, Any]]:
        return [t.wire() for t in self.tools]

    def offer(self, first: bool) -> ToolOffer:
        """The tools as a reply's request offers them: the first reply with `first_choice`, later ones "auto"."""
        return ToolOffer(tuple(self.wire()), choice=self.first_choice if first else "auto")

    def find(self, name: str) -> OfferedTool | None:
        return self._by_name.get(name)

    def run_call(self, call: Call) -> CallOutcome:
        """Decide, then run (or not) one call, on this thread."""
        prepared = self.prepare(call)
        if isinstance(prepared, CallOutcome):
            return prepared
        decision = decide(prepared, self.approver, self.rules, self.who)
        return CallOutcome(call, prepared, decision, self.host.call_tool(prepared, decision))

    def prepare(self, call: Call) -> ToolRequest | CallOutcome:
        """The request a call makes, or its outcome when nothing may run: a call of a tool the turn
        does not offer, or with arguments its schema refuses, goes back to the model as an error."""
        offered = self._by_name.get(call.name)
        if offered is None:
            names = ", ".join(sorted(self._by_name)) or "none"
            return CallOutcome(
                call,
                None,
                None,
                ToolResult(f"There is no tool named '{call.name}' in this conversation (the tools are: {names}); nothing ran.", "failed"),
            )
        arguments = json.loads(call.arguments)
        problem = schema_problem(arguments, offered.info.input_schema) if offered.info.input_schema else None
        if problem:
            return CallOutcome(
                call, None, None, ToolResult(f"The call of '{call.name}' does not match its schema ({problem}); nothing ran.", "failed")
            )
        # The server's own tool name: the name the model called may be the SERVER_TOOL `offer` made.
        # A rule that no longer applies says why in the question (the deferred loop's too).
        return with_reason(ToolRequest(offered.server, offered.info.name, arguments), self.rules)

    def ruled(self, request: ToolRequest) -> Decision | None:
        """The Decision an "always" rule makes for `request` without asking, or None: ask."""
        if not self.rules.allows(request.server, request.tool):
            return None
        return decide(request, _not_asked, self.rules, self.who)

    def answered(self, request: ToolRequest, verdict: str) -> Decision:
        """The Decision for the person's answer (ALLOW_ONCE, ALWAYS, DENY; anything else denies);
        "always" is kept in the same rules as the terminal's."""
        return decide(request, lambda _request: verdict, self.rules, self.who)


def _not_asked(_request: ToolRequest) -> str:
    return DENY  # never reached: `ruled` decides only what a rule already allows


def assistant_with_calls(content: str, calls: list[Call]) -> dict[str, Any]:
    """A reply with calls as chat templates expect it (OpenAI's shape, arguments as JSON text)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls],
    }


def tool_message(call: Call, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}


def call_arguments(text: str) -> Any:
    """A call's arguments as the record keeps them: the object, or the text when it is no JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def call_key(call: Call) -> tuple[str, str]:
    """A call's tool and arguments in one spelling, to tell a call made again."""
    try:
        return call.name, json.dumps(json.loads(call.arguments), sort_keys=True)
    except ValueError:
        return call.name, call.arguments
