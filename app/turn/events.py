"""What a turn tells whoever drives it, in order: `LoadedEvent` / `RecheckedEvent` while the
model gets ready, `ConsentEvent` when messages would first leave for a public host, then the
reply's `TextEvent`s (a `MetricsEvent` after the first text), and exactly one `EndEvent`. A reply
that reasons (app/reasoning) gives its reasoning as `ReasoningEvent`s, never as text: they come
first, as the model writes it; the reply's row keeps it in `Message.reasoning` and its metrics
say how long it took (`reasoning_ms`).

In a turn with tools (app/turn/tools.py), a reply that asks for tools is followed by a
`ToolCallEvent` and a `ToolResultEvent` for each call (decided, run or not, and written), then
the next reply's events (model, call, result, model). With a deferred tool loop a call's
`ToolCallEvent` may carry a question; its result follows once the driver answered and the
call ran on a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.generation import Failure, StartedInfo, TokenEvent
from app.engine.loaded import LoadedModel
from app.mcp.approval import ToolRequest
from app.store.history import Message
from app.store.save_errors import ReplyNotSaved
from models.library import FileRecheck, InstalledModel

# Text of the reply as it arrived: .text, and .t (time.perf_counter() when it reached this process).
TextEvent = TokenEvent


@dataclass(frozen=True)
class ReasoningEvent:
    """Reasoning of the reply as it arrived (a template that thinks: `<think>`, gpt-oss's analysis
    channel), kept apart from its text: `text`, and `t` (time.perf_counter() when it reached this
    process), as TextEvent has them."""

    text: str
    t: float


@dataclass(frozen=True)
class LoadedEvent:
    """The turn loaded its model of this machine (or found it loaded)."""

    loaded: LoadedModel


@dataclass(frozen=True)
class RecheckedEvent:
    """The model file's size or mtime changed, so it was hashed again before loading. `updated`:
    its library entry, now naming the new bytes (this reply's row too); `error` when that could
    not be recorded (the turn goes on)."""

    recheck: FileRecheck
    updated: InstalledModel | None = None
    error: Exception | None = None


@dataclass(frozen=True)
class ConsentEvent:
    """Messages would go to a host outside the private network nobody agreed to; nothing was
    sent. A driver that can ask starts the turn again on a yes (`Turn.launch`)."""

    host: str
    connection: str
    sentence: str = ""


@dataclass(frozen=True)
class MetricsEvent:
    """What the reply's first token made known, in the keys of its final metrics (ttft_ms,
    prompt_tokens, cached_tokens, prompt_tps)."""

    figures: dict[str, Any]


@dataclass(frozen=True)
class ToolCallEvent:
    """The model asked for a tool; the question is asked (or a rule allows it) next. In a turn
    whose tool loop is deferred, `question` is the request waiting for the person's answer
    (`Turn.answer(call_id, verdict)`); None when a rule answered or nothing may run."""

    call_id: str
    name: str
    arguments: str  # as the model wrote them (JSON text)
    server: str = ""  # the tool server it runs on ("" when the turn offers no tool of that name)
    question: ToolRequest | None = None


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool's answer (or the denial, or why it could not run), as the model is given it."""

    call_id: str
    content: str
    is_error: bool = False
    server: str = ""
    status: str = "ok"  # app.mcp.results.ToolResult.status: ok, tool_error, failed, denied, interrupted
    approved_by: str = ""  # who decided, as the record keeps it ("" when nothing could run)


@dataclass(frozen=True)
class EndEvent:
    """The turn is over and written. `message`: the final reply row (or, when the history could
    not take it, the reply kept in memory: `not_saved` says why), its text, status, metrics and
    error as written. `before_reply`: it failed before any model ran it (nothing was generated).
    What only the engine knows, for a driver that answers in numbers (an API server), filled in by
    the Turn: `started`, the prompt's figures as the engine said them as the reply started (None
    when no reply started), and `failure`, why a reply that ended as an error failed (None
    otherwise)."""

    message: Message
    before_reply: bool = False
    not_saved: ReplyNotSaved | None = None
    started: StartedInfo | None = None
    failure: Failure | None = None

    @property
    def status(self) -> str:
        return self.message.status


TurnEvent = (
    LoadedEvent | RecheckedEvent | ConsentEvent | TextEvent | ReasoningEvent | MetricsEvent | ToolCallEvent | ToolResultEvent | EndEvent
)
