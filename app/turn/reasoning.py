"""One reply's reasoning inside a turn (app/turn/turn.py): its text events split into reasoning
(`ReasoningEvent`s) and the rest (the text the turn goes on with: the content, or with tools
what the tool gate reads), by the mode the engine host gave the reply (app/reasoning/style.py);
at its end, the whole reply split again (what the stream held back settled), and its figures:
`reasoning_ms` (from the reply's first token to the end of its reasoning) and
`reasoning_tokens` (the engine's text events while it reasoned: one per token)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.engine.generation import FinishedEvent, StartedInfo
from app.reasoning.split import Splitter, split_reply
from app.reasoning.style import MODE_NONE
from app.turn.events import ReasoningEvent, TextEvent


class ReplyReasoning:
    """Made at a reply's first text; `text` is its reasoning so far."""

    def __init__(self, started: StartedInfo | None) -> None:
        self.mode = started.reasoning if started is not None else MODE_NONE
        # With tools the engine read, a gpt-oss reply's markup goes on to the tool gate and parser.
        self.markup = bool(started.tool_format) if started is not None else False
        self._splitter = Splitter(self.mode, markup=self.markup)
        self._t_first: float | None = None
        self._t_closed: float | None = None
        self._t_last = 0.0
        self._events_while_open = 0

    @property
    def text(self) -> str:
        return self._splitter.reasoning

    def take(self, event: TextEvent) -> tuple[list[ReasoningEvent], TextEvent]:
        """The reasoning `event` makes known, and the event with the rest of its text."""
        if self.mode == MODE_NONE:
            return [], event
        if self._t_first is None:
            self._t_first = event.t
        if not self._splitter.closed:
            self._events_while_open += 1
        reasoning, rest = self._splitter.more(event.text)
        if self._splitter.closed and self._t_closed is None:
            self._t_closed = event.t
        thought = [ReasoningEvent(reasoning, event.t)] if reasoning else []
        if reasoning:
            self._t_last = event.t
        return thought, replace(event, text=rest) if rest != event.text else event

    def end(self, event: FinishedEvent, t: float) -> tuple[list[ReasoningEvent], str, FinishedEvent]:
        """At the reply's end: the reasoning the stream still held, the rest it held (for a turn
        without tools to give out), and the end with the whole reply's rest as its text and the
        reasoning's figures in its metrics. `t`: now."""
        if self.mode == MODE_NONE or event.text is None:
            return [], "", event
        reasoning, rest = split_reply(self.mode, event.text, markup=self.markup)
        sent_r, sent = self._splitter.reasoning, self._splitter.rest
        more_r = reasoning[len(sent_r) :] if reasoning.startswith(sent_r) else ""
        more = rest[len(sent) :] if rest.startswith(sent) else ""
        self._splitter.reasoning = reasoning
        metrics: dict[str, Any] = dict(event.metrics)
        if reasoning and self._t_first is not None:
            until = self._t_closed if self._t_closed is not None else max(self._t_last, self._t_first)
            metrics["reasoning_ms"] = round((until - self._t_first) * 1000.0, 1)
            metrics["reasoning_tokens"] = self._events_while_open
        thought = [ReasoningEvent(more_r, t)] if more_r else []
        return thought, more, replace(event, text=rest, metrics=metrics)
