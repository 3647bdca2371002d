"""`ToolStep`: the calls of one reply, one after another, each decided, run and written before
the next, for `Turn`. It owns the step's state: the calls still to go, the question waiting for
the person's answer (a deferred loop) and the call running on a worker thread.

A call that was sent is always written: one whose result never came (Ctrl-C or a signal while it
ran, or quitting the window) is written with status 'interrupted' and a result that says it is
unknown, before the interruption goes on.

Threading invariant: every method runs on the thread that drives the turn (the history's);
the worker thread of a deferred loop only calls `McpHost.call_tool` (which blocks on the
host's own asyncio thread) and sets its `_Running.outcome`, which the driving thread picks up
in `take`. The rows and the record entry are written by the driving thread only.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.mcp.approval import Decision, ToolRequest, decide
from app.mcp.failures import interrupted
from app.mcp.results import ToolResult
from app.tools.parsers import Call
from app.turn.events import ToolCallEvent, ToolResultEvent, TurnEvent
from app.turn.tools import CallOutcome, ToolLoop, tool_message


@dataclass
class _Running:
    """A decided call on its worker; `outcome` is set by the worker when it is done."""

    call: Call
    request: ToolRequest
    decision: Decision
    outcome: CallOutcome | None = None
    thread: threading.Thread | None = None


class UnknownQuestion(LookupError):
    """An answer for a call that is not waiting for one (answered already, or another turn's)."""


class ToolStep:
    """`advance(out)` goes on with the calls until one waits (a question, a call on its worker)
    or all are written; `done` then says whether the step is over. `results` are the tool
    messages the model is given next; `failed` the ids of the calls whose results were errors.
    `not_run`: calls that must not run (id: what the model is told instead), asked nothing."""

    def __init__(
        self, loop: ToolLoop, calls: list[Call], writer: Any, cancelled: Callable[[], bool], not_run: dict[str, str] | None = None
    ) -> None:
        self.loop = loop
        self._not_run = not_run or {}
        self.failed: set[str] = set()
        self.writer = writer
        self._calls = deque(calls)
        self._cancelled = cancelled
        self.results: list[dict[str, Any]] = []
        self.asking: tuple[Call, ToolRequest] | None = None  # the question up (deferred loop)
        self.running: _Running | None = None  # the call on its worker (deferred loop)

    @property
    def done(self) -> bool:
        return self.asking is None and self.running is None and (not self._calls or self._cancelled())

    def advance(self, out: list[TurnEvent]) -> None:
        """Take the next calls: each is announced, then (synchronous loop) decided and run here, or
        (deferred) asked, or started on a worker when a rule allows it. After a Stop no further
        call is taken. Events go into `out` as they happen (a Ctrl-C at a question keeps them)."""
        while self.asking is None and self.running is None and self._calls and not self._cancelled():
            call = self._calls.popleft()
            offered = self.loop.find(call.name)
            server = offered.server.name if offered is not None else ""
            why = self._not_run.get(call.id)
            if why is not None:
                out.append(ToolCallEvent(call.id, call.name, call.arguments, server=server))
                out.append(self._written(CallOutcome(call, None, None, ToolResult(why, "failed")), server))
                continue
            if not self.loop.deferred:
                out.append(ToolCallEvent(call.id, call.name, call.arguments, server=server))
                self._run_here(call, server, out)
                continue
            prepared = self.loop.prepare(call)
            if isinstance(prepared, CallOutcome):  # nothing may run: no question
                out.append(ToolCallEvent(call.id, call.name, call.arguments, server=server))
                out.append(self._written(prepared, server))
                continue
            decision = self.loop.ruled(prepared)
            if decision is None:
                self.asking = (call, prepared)
                out.append(ToolCallEvent(call.id, call.name, call.arguments, server=server, question=prepared))
            else:
                out.append(ToolCallEvent(call.id, call.name, call.arguments, server=server))
                self._start(call, prepared, decision)

    def answer(self, call_id: str, verdict: str) -> None:
        """The person's answer to the question up; the call starts on its worker (a denial never
        reaches the server: the host answers it at once)."""
        if self.asking is None or self.asking[0].id != call_id:
            raise UnknownQuestion(f"no tool call '{call_id}' is waiting for an answer")
        call, request = self.asking
        self.asking = None
        self._start(call, request, self.loop.answered(request, verdict))

    def drop_question(self) -> bool:
        """Stop while a question was up: the call does not run (and is not written). True if one was up."""
        dropped = self.asking is not None
        self.asking = None
        self._calls.clear()
        return dropped

    def take(self, out: list[TurnEvent]) -> None:
        """A call its worker finished: written here, then the next calls."""
        running = self.running
        if running is None or running.outcome is None:
            return
        self.running = None
        offered = self.loop.find(running.call.name)
        out.append(self._written(running.outcome, offered.server.name if offered is not None else ""))
        self.advance(out)

    def quit(self, timeout_s: float) -> None:
        """At quit: no question, no further call; the call on its worker gets up to `timeout_s`,
        then is written as it ended, or as sent with its result unknown (it was allowed and may
        have run: the history and the record keep that it was made)."""
        self.drop_question()
        running = self.running
        if running is None:
            return
        if running.thread is not None:
            running.thread.join(timeout_s)
        if running.outcome is None:
            running.outcome = CallOutcome(running.call, running.request, running.decision, interrupted(running.request, "Cove quit"))
        self.take([])

    def _run_here(self, call: Call, server: str, out: list[TurnEvent]) -> None:
        """Decide and run one call on this thread (the synchronous loop: `cove chat`). A Ctrl-C or
        a signal while an allowed call runs writes it as interrupted, then goes on up the stack."""
        loop = self.loop
        prepared = loop.prepare(call)
        if isinstance(prepared, CallOutcome):
            out.append(self._written(prepared, server))
            return
        decision = decide(prepared, loop.approver, loop.rules, loop.who)  # a Ctrl-C here: nothing was sent
        try:
            result = loop.host.call_tool(prepared, decision)
        except KeyboardInterrupt as exc:  # Terminated (SIGTERM, SIGHUP) is one too
            if not decision.allowed:  # a denial never reaches the server
                raise
            stopped_by = str(exc) or "SIGINT"
            outcome = CallOutcome(call, prepared, decision, interrupted(prepared, f"Cove was stopped ({stopped_by})"))
            out.append(self._written(outcome, server))
            raise
        out.append(self._written(CallOutcome(call, prepared, decision, result), server))

    def _start(self, call: Call, request: ToolRequest, decision: Decision) -> None:
        running = _Running(call, request, decision)
        self.running = running
        if not decision.allowed:  # the host answers a denial without reaching the server
            running.outcome = CallOutcome(call, request, decision, self.loop.host.call_tool(request, decision))
            return
        host = self.loop.host

        def work() -> None:  # the worker: only the host's blocking call, no history
            try:
                result = host.call_tool(request, decision)
            except Exception as exc:  # noqa: BLE001 - the model is told, the turn goes on
                result = ToolResult(f"The call of '{request.tool}' on '{request.server.name}' failed: {exc}", "failed")
            running.outcome = CallOutcome(call, request, decision, result)

        running.thread = threading.Thread(target=work, name="cove-tool-call", daemon=True)
        running.thread.start()

    def _written(self, outcome: CallOutcome, server: str) -> ToolResultEvent:
        call = outcome.call
        writer = self.writer
        writer.add_tool_call(call.id, call.name, outcome.request)
        entry = writer.record_tool(outcome)
        writer.add_tool_result(call.id, call.name, outcome, entry)
        self.results.append(tool_message(call, outcome.result.text))
        if outcome.result.is_error:
            self.failed.add(call.id)
        decision = outcome.decision
        return ToolResultEvent(
            call.id,
            outcome.result.text,
            outcome.result.is_error,
            server=server,
            status=outcome.result.status,
            approved_by=decision.approved_by if decision is not None else "",
        )
