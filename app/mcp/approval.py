"""The consent gate: a tool call runs only with a Decision made here for exactly that call.

`decide` asks the approver (a dialog, the terminal, or `--allow-tools`) unless an "always"
rule kept for this tool of this server, bound to its exact command line or URL and to the files
it runs (app/mcp/identity.py), already allows it. A rule that no longer applies puts its sentence
in the question (`ToolRequest.asked_again`). `McpHost.call_tool` refuses to reach a server
without a Decision that matches the call and allows it, so no caller can skip the question by
going around a dialog.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from app.mcp.servers import ToolServer

ALLOW_ONCE, ALWAYS, DENY = "once", "always", "deny"
_MINT = object()  # only this module makes Decisions


class ApprovalRequired(RuntimeError):
    """A call reached the host without a Decision for it (a caller skipped `decide`)."""


@dataclass(frozen=True)
class ToolRequest:
    """One call a model (or the person) wants to make, shown in full before it runs."""

    server: ToolServer
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # Why an "always" kept for this tool no longer covers it ("" when none was kept): the question
    # shows it. Not part of `key`: the Decision is for the call, whatever the question said.
    asked_again: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """What a Decision is bound to: server identity, tool and arguments."""
        body = json.dumps([self.server.identity, self.tool, self.arguments], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def arguments_text(self) -> str:
        return json.dumps(self.arguments, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Decision:
    """The answer for one ToolRequest: `verdict` is ALLOW_ONCE, ALWAYS or DENY; `approved_by`
    says who decided, as the record keeps it."""

    request_key: str
    verdict: str
    approved_by: str
    _mint: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._mint is not _MINT:
            raise ApprovalRequired("a tool call's decision comes only from app.mcp.approval.decide")

    @property
    def allowed(self) -> bool:
        return self.verdict in (ALLOW_ONCE, ALWAYS)

    def covers(self, request: ToolRequest) -> bool:
        return self._mint is _MINT and self.request_key == request.key


class AlwaysRules(Protocol):
    def allows(self, server: ToolServer, tool: str) -> bool: ...
    def remember(self, server: ToolServer, tool: str) -> None: ...


@runtime_checkable
class ExplainedRules(AlwaysRules, Protocol):
    """Rules that also say why one kept for a tool no longer applies (app/mcp/store.py)."""

    def asked_again(self, server: ToolServer, tool: str) -> str | None: ...


# Answers ALLOW_ONCE, ALWAYS or DENY; anything else, or an exception, counts as DENY.
Approver = Callable[[ToolRequest], str]


def decide(request: ToolRequest, approver: Approver, rules: AlwaysRules, who: str = "the person") -> Decision:
    if rules.allows(request.server, request.tool):
        return Decision(request.key, ALWAYS, f"{who} (always allowed, kept for {request.server.identity})", _MINT)
    request = with_reason(request, rules)
    try:
        answer = approver(request)
    except Exception:  # noqa: BLE001 - a question that could not be asked is not a yes
        answer = DENY
    if answer == ALWAYS:
        rules.remember(request.server, request.tool)
        return Decision(request.key, ALWAYS, f"{who} (always allow this tool)", _MINT)
    if answer == ALLOW_ONCE:
        return Decision(request.key, ALLOW_ONCE, f"{who} (allowed once)", _MINT)
    return Decision(request.key, DENY, f"{who} (denied)", _MINT)


def with_reason(request: ToolRequest, rules: AlwaysRules) -> ToolRequest:
    """`request` with the sentence on why the "always" kept for its tool no longer applies, when
    `rules` can say (ExplainedRules) and one was kept."""
    if request.asked_again or not isinstance(rules, ExplainedRules):
        return request
    why = rules.asked_again(request.server, request.tool)
    if not why:
        return request
    return replace(request, asked_again=f'You chose "always" for this tool before, but {why}.')


def allow_without_asking(_request: ToolRequest) -> str:
    """The approver of `--allow-tools`: the person allowed every call of this run up front."""
    return ALLOW_ONCE


def denial_text(request: ToolRequest) -> str:
    return f"The person denied this call of the tool '{request.tool}' on the server '{request.server.name}'; it did not run."
