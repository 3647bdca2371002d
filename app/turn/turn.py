"""`Turn`: one reply to a message already in the history, from start to its written end.

The window and `cove chat` drive it the same way: `start(backend)` (blocking, on the driver's
thread) or `launch(backend)` (on a thread of its own, so a load never blocks a UI), then the
events: `poll()` takes what has arrived without waiting (a UI frame), `next_event()` waits for
the next one (a terminal). Both write as they go: the reply's text into the writer, and at the
end its status (app/turn/status.py), metrics and the record, in one `finish`.

The reply's inputs are one ReplyRequest (app/engine/request.py) its front end built, passed to
the backend as it is; a turn with tools adds its offer, and each later reply of a tool loop is
that request with the conversation so far (`request.but`).

Threading invariant: the writer, and the library for a recheck, are touched only by the thread
that calls poll/next_event/cancel_before_start/fail/abandon; the start thread only builds the
prompt, borrows the engine and starts the reply, appending to a deque.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from app.engine.client import EngineError, FinishedEvent, Generation
from app.engine.generation import Failure, StartedInfo
from app.engine.request import ReplyRequest
from app.images.store import ImageStore
from app.remote.connections import ConnectionProblem
from app.remote.errors import RemoteProblem
from app.remote.privacy import ConsentNeeded
from app.statuses import MessageStatus
from app.store.save_errors import ReplyNotSaved
from app.termination import Terminated
from app.tools.families import Family
from app.tools.parsers import Call, held, parse_calls
from app.tools.reply import ContentGate, family_named
from app.turn.answer_step import ASKED_TO_ANSWER, NO_CALL_FIRST, answer_messages, limit_note, not_run_result, repeated_note
from app.turn.backend import Backend, server_connection
from app.turn.events import ConsentEvent, EndEvent, LoadedEvent, MetricsEvent, RecheckedEvent, TextEvent, ToolCallEvent, TurnEvent
from app.turn.figures import first_figures
from app.turn.reasoning import ReplyReasoning
from app.turn.status import StopCause, end_status
from app.turn.tool_step import ToolStep
from app.turn.tools import ToolLoop, assistant_with_calls, call_arguments, call_key
from app.turn.writer import TurnWriter
from models.library import InstalledModel, ModelLibrary, ModelNotFound
from models.network import NetworkRefused

# Problems that end a turn before any model ran it, as one sentence.
EXPECTED = (EngineError, RemoteProblem, NetworkRefused, ConnectionProblem)


class _Failed:
    def __init__(self, error: str) -> None:
        self.error = error


class EngineLender(Protocol):
    """Lends this machine's engine while another user of it (the window's API server) has it."""

    def borrow(self, model: InstalledModel, cancelled: Callable[[], bool]) -> Any: ...

    def give_back(self, lease: Any) -> None: ...


class Turn:
    """`request`: the reply's request as its front end built it. `messages`: how to build its
    messages on the start thread, each time it starts (the window reads the conversation there
    through its own read-only connection); None: the request has them. `gate`: the engine
    lender, for a model of this machine. `library`: where a changed model file is recorded.
    `tools`: the tool loop, or a callable that builds it on the start thread (the window lists
    its servers' tools there); None, or a callable returning None: no tools. A front end may set
    `request` again before a `launch` (the window reads the person's settings at each one).
    `images`: where the conversation's images are kept (app/images/store.py), for the engine to read."""

    def __init__(
        self,
        writer: TurnWriter,
        request: ReplyRequest,
        *,
        messages: Callable[[], list[dict[str, Any]]] | None = None,
        gate: EngineLender | None = None,
        library: ModelLibrary | None = None,
        tools: ToolLoop | Callable[[], ToolLoop | None] | None = None,
        images: ImageStore | None = None,
    ) -> None:
        self.writer = writer
        self._images = images
        self.request = request
        self.backend: Backend | None = None
        self.sent: list[dict[str, Any]] | None = None  # the prompt as sent (for the record), once built
        self.t0 = time.perf_counter()  # the turn's clock: its turn_ms counts from here
        self.stop_cause: StopCause | None = None
        self.ended: EndEvent | None = None
        self._messages = messages
        self.gate = gate
        self._library = library
        self._lease: Any = None
        self._inline = False
        self._thread: threading.Thread | None = None
        self._generation: Generation | None = None
        self._cancel = threading.Event()
        self._early: deque[Any] = deque()  # from the start thread: loaded, rechecked, consent, failed, a first end
        self._out: deque[TurnEvent] = deque()  # taken and written, waiting for next_event
        self._first_text = False
        # The tool loop (None: the model is offered no tools); a callable is built by `_start`.
        self.tools: ToolLoop | None = tools if isinstance(tools, ToolLoop) else None
        self._build_tools = tools if callable(tools) and not isinstance(tools, ToolLoop) else None
        self.steps = 0  # replies of this turn that asked for tools
        self._calls_made: set[tuple[str, str]] = set()  # (name, arguments) of the calls this turn made
        self._failed: set[str] = set()  # ids of the calls whose results were errors
        self._answering = ""  # the note of a loop that cannot go on, while the model answers without tools
        self._raw = ""  # with tools: the reply's text so far, of which the gate passes on the content
        self._gate: ContentGate | None = None
        self._step: ToolStep | None = None  # the calls of the reply that asked for tools, while they run
        self._step_reply: dict[str, Any] = {}  # that reply as the next prompt gives it
        self._reasoning: ReplyReasoning | None = None  # the reply's reasoning kept apart (app/turn/reasoning.py)
        self._thought = ""  # the last ended reply's reasoning, for the next prompt of a tool step

    # ---- starting (the start thread) ---------------------------------------------------------

    def start(self, backend: Backend | Callable[[], Backend]) -> None:
        """Build the prompt, borrow the engine if lent, start the reply (loading first if need
        be), on this thread: the driver's own (events it causes are written by the next
        poll/next_event). `backend` may be how to get it once the prompt is built. Problems
        become events; anything else (KeyboardInterrupt) is raised."""
        self._inline = True
        self._start(backend)

    def launch(self, backend: Backend) -> None:
        """`start` on a thread of its own (again after a ConsentEvent, with a new backend)."""
        self._inline = False
        self._generation = None
        self._thread = threading.Thread(target=self._run, args=(backend,), name="cove-turn", daemon=True)
        self._thread.start()

    def _run(self, backend: Backend) -> None:
        try:
            self._start(backend)
        except Exception as exc:  # noqa: BLE001 - e.g. the history could not be read: a sentence, not a hang
            self._early.append(_Failed(f"the conversation could not be prepared for the model ({exc})"))

    def _start(self, backend: Backend | Callable[[], Backend]) -> None:
        if self._messages is not None:
            messages = self._messages()
            self.request = self.request.but(messages=messages)
        else:
            messages = self.request.message_dicts()
        self.sent = messages
        if self.request.images():
            missing = self._with_image_files()
            if missing:
                self._early.append(_Failed(missing))
                return
        build, self._build_tools = self._build_tools, None
        if build is not None:  # before any event: the driver's thread reads `tools` only after one
            self.tools = build()
        request = self.request if self.tools is None else self.request.but(tools=self.tools.offer(first=True))
        try:
            if callable(backend):
                backend = backend()
            self.backend = backend
            installed = backend.installed
            if self.gate is not None and installed is not None:
                self._lease = self.gate.borrow(installed, self._cancel.is_set)
                if self._lease is None and self._cancel.is_set():  # stopped while an API request used the engine
                    self._early.append(FinishedEvent("", MessageStatus.CANCELLED, {}))
                    return
            generation = backend.start(
                request, on_loaded=lambda loaded: self._early.append(LoadedEvent(loaded)), on_recheck=self._on_recheck
            )
        except ConsentNeeded as exc:  # nothing was sent
            model = self.backend.model if self.backend is not None else None
            self._early.append(ConsentEvent(exc.host, exc.connection or server_connection(model) or "", str(exc)))
            return
        except EXPECTED as exc:
            self._early.append(_Failed(str(exc)))
            return
        self._generation = generation
        if self._cancel.is_set():
            generation.cancel()

    def _with_image_files(self) -> str:
        """The request's images given their files; "" when every one is there, else the sentence
        that ends the turn: a picture gone from Cove's images folder is not sent as nothing."""
        files = dict(self.request.image_files)  # (an API request's come with it)
        shas = [image.sha256 for image in self.request.images()]
        if self._images is not None:
            files.update(self._images.files(sha for sha in shas if sha not in files))
        gone = [sha for sha in shas if sha not in files]
        if gone:
            return (
                f"the image {gone[0][:12]}… of this conversation is no longer in Cove's images folder, so it cannot be "
                "sent; remove it from the message or send the picture again"
            )
        self.request = self.request.but(image_files=files)
        return ""

    def _on_recheck(self, recheck: Any) -> None:
        # Inline, the driver's thread writes it now (a failure is raised, ending the turn);
        # from a thread of its own, the next poll writes it.
        self._early.append(self._recorded(recheck, raising=True) if self._inline else RecheckedEvent(recheck))

    # ---- the driver's thread -----------------------------------------------------------------

    def poll(self) -> list[TurnEvent]:
        """Everything that has happened since the last call, without waiting, written: the start
        events first, then the reply's text and, at its end, exactly one EndEvent."""
        out = list(self._out)
        self._out.clear()
        while self._early and self.ended is None:
            out.extend(self._take(self._early.popleft()))
        if self._step is not None and self.ended is None:
            out.extend(self._poll_step())
        generation = self._generation
        if generation is not None and self.ended is None and self._step is None:
            for event in generation.take_ready():
                out.extend(self._take(event))
        return out

    def next_event(self) -> TurnEvent | None:
        """The next event, waiting for it; None after the EndEvent. A KeyboardInterrupt while it
        waits leaves the turn usable: `cancel()` and keep reading to the end."""
        while not self._out:
            if self.ended is not None:
                return None
            if self._early:
                self._out.extend(self._take(self._early.popleft()))
            elif self._generation is not None:
                self._out.extend(self._take(next(self._generation)))
            else:  # started, and ended without a reply or an event: the driver decides
                return None
        return self._out.popleft()

    def _take(self, event: Any) -> list[TurnEvent]:
        if isinstance(event, TextEvent):
            thought, event = self._reasoned(event)  # the reasoning apart; the event keeps the rest
            if self.tools is not None:  # what may become a call is held back until the reply is read
                event = self._gated(event)
            self.writer.append(event.text)  # checkpointed at most once a second
            if self._first_text or not (event.text or thought):
                return [*thought, event]
            self._first_text = True
            figures = first_figures(self._generation)
            return [*thought, event, MetricsEvent(figures)] if figures else [*thought, event]
        if isinstance(event, RecheckedEvent) and event.updated is None and event.error is None:
            return [self._recorded(event.recheck, raising=False)]
        if isinstance(event, FinishedEvent):
            thought, event = self._reasoned_end(event)
            if self.tools is not None:
                return [*thought, *self._tool_step(event)]
            return [*thought, self._end_reply(event)]
        if isinstance(event, _Failed):
            return [self.fail(event.error)]
        return [event]

    def _reasoned(self, event: TextEvent) -> tuple[list[TurnEvent], TextEvent]:
        """A reply's text split into its reasoning (ReasoningEvents) and the rest (app/turn/reasoning.py)."""
        if self._reasoning is None:
            self._reasoning = ReplyReasoning(self._generation.started if self._generation is not None else None)
        thought, event = self._reasoning.take(event)
        if thought:
            writer: Any = self.writer
            writer.reasoning = self._reasoning.text
        return list(thought), event

    def _reasoned_end(self, event: FinishedEvent) -> tuple[list[TurnEvent], FinishedEvent]:
        """A reply's end: its text without its reasoning, which the writer keeps (and the reasoning
        and the rest the stream still held, given out now); the next reply starts afresh."""
        reasoning, self._reasoning = self._reasoning, None
        if reasoning is None:
            if event.text is None or self._generation is None or self._generation.started is None:
                return [], event
            reasoning = ReplyReasoning(self._generation.started)  # a reply whose text came only at its end
        thought, rest, event = reasoning.end(event, time.perf_counter())
        writer: Any = self.writer
        writer.reasoning = self._thought = reasoning.text
        out: list[TurnEvent] = list(thought)
        if rest and self.tools is None:
            self.writer.append(rest)
            out.append(TextEvent(rest, time.perf_counter()))
        return out, event

    def _with_thought(self, reply: dict[str, Any]) -> dict[str, Any]:
        """A tool step's reply as the next prompt gives it, with its reasoning (the template
        decides whether it is rendered: gpt-oss keeps a call's analysis)."""
        return {**reply, "reasoning": self._thought} if self._thought else reply

    def _recorded(self, recheck: Any, *, raising: bool) -> RecheckedEvent:
        """Write a changed model file's new checksum to its entry and this reply's row."""
        if self._library is None:
            return RecheckedEvent(recheck)
        try:
            # The turn's own model, found by its file: the person may have picked another meanwhile.
            name = self._library.get(recheck.path).name
            return RecheckedEvent(recheck, self.writer.record_recheck(self._library, name, recheck))
        except (sqlite3.Error, ModelNotFound) as exc:
            if raising:
                raise
            return RecheckedEvent(recheck, error=exc)

    # ---- the tool loop (the driver's thread) ------------------------------------------------

    def _gated(self, event: TextEvent) -> TextEvent:
        if self._gate is None:
            self._gate = ContentGate(self._family(None), self._tool_names())
        self._raw += event.text
        return replace(event, text=self._gate.more(self._raw))

    def _tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools.tools) if self.tools is not None else ()

    def _family(self, metrics: dict[str, Any] | None) -> Family:
        return family_named(str((metrics or {}).get("tool_format") or ""))

    def _tool_step(self, event: FinishedEvent) -> list[TurnEvent]:
        """A reply's end in a turn with tools: its calls run (each decided first) and the model is
        called again with their results; a reply without calls, or stopped, ends the turn. With
        a deferred loop a call may wait for `answer` and run on a worker; `poll` goes on."""
        assert self.tools is not None
        family = self._family(event.metrics)
        parsed = parse_calls(family, event.text, self._tool_names())
        calls = list(parsed.calls if family.parallel else parsed.calls[:1])
        gate, self._gate, self._raw = self._gate, None, ""
        if self._answering:  # the last reply, asked for without tools: a call in it does not run
            event = replace(event, metrics={**event.metrics, "tool_note": self._answering})
        if event.status != MessageStatus.COMPLETE or not calls or self._cancel.is_set() or self._answering:
            return self._ended_without_calls(event, family, gate, parsed.content if calls else None, parsed.content)
        repeated = [c for c in calls if call_key(c) in self._calls_made]
        not_run: dict[str, str] = {}
        if self.steps >= self.tools.max_steps or len(repeated) == len(calls):
            at_limit = self.steps >= self.tools.max_steps
            note = limit_note(self.steps) if at_limit else repeated_note(repeated[0].name)
            if parsed.content.strip():  # the model said something beside the calls: that is its answer
                self._note_raw(event.text, calls)
                return [self._end_reply(replace(event, text=parsed.content, metrics={**event.metrics, "tool_note": note}))]
            # The calls are written as not run, and the model answers once more, without tools.
            self._answering = note + ASKED_TO_ANSWER
            not_run = {c.id: not_run_result(c, not at_limit, self.steps) for c in calls}
        else:
            self.steps += 1
            self._calls_made.update(call_key(c) for c in calls)
        writer: Any = self.writer
        writer.sent = self.sent
        metrics = {
            **event.metrics,
            "turn_ms": round((time.perf_counter() - self.t0) * 1000.0, 1),
            "tool_calls": [{"id": c.id, "name": c.name} for c in calls],
        }
        self._note_raw(event.text, calls)
        writer.finish_step(parsed.content, metrics)
        self._step = ToolStep(self.tools, calls, writer, self._cancel.is_set, not_run)
        # The reply as the model wrote it, for a template that can be given that text (app/engine/host/templates.py).
        self._step_reply = self._with_thought({**assistant_with_calls(parsed.content, calls), "as_written": event.text})
        out: list[TurnEvent] = []
        try:
            self._step.advance(out)
        except KeyboardInterrupt as exc:  # Ctrl-C or a signal at the question: the turn ends stopped here
            self.cancel(StopCause.SIGNAL if isinstance(exc, Terminated) else StopCause.PERSON)
            self._step = None
            writer.next_reply()
            self._out.extend(out)
            self._out.append(self._write(end_status(MessageStatus.CANCELLED, self.stop_cause), {}, None, "", before_reply=False))
            raise
        return out + self._after_calls()

    def _note_raw(self, raw: str, calls: list[Call]) -> None:
        """The record entry of this reply keeps the model's raw output and the calls read from it."""
        writer: Any = self.writer
        writer.note_raw(raw, [{"id": c.id, "name": c.name, "arguments": call_arguments(c.arguments)} for c in calls])

    def _ended_without_calls(
        self, event: FinishedEvent, family: Family, gate: ContentGate | None, content: str | None, clean: str
    ) -> list[TurnEvent]:
        """The end of a reply whose calls do not run: none, or it was stopped. A call the token
        limit (or a Stop) cut off mid-markup is kept out of the text, and a `tool_note` says so.
        `clean`: the reply's content as its family reads it (without a Harmony reply's channels)."""
        text = clean if content is None else content
        if text != event.text:
            self._note_raw(event.text, [])  # the record keeps what the model wrote
        metrics = event.metrics
        at = held(family, event.text, self._tool_names())
        # A reply that ended otherwise than complete within a call (or with whole calls: they did not run).
        cut = (
            event.status != MessageStatus.COMPLETE
            and at < len(event.text)
            and (content is not None or not family.opener.startswith(event.text[at:]))
        )
        if cut:
            text = event.text[:at]
            why = (
                "the token limit"
                if event.status == MessageStatus.LENGTH
                else "the Stop"
                if event.status == MessageStatus.CANCELLED
                else f"the reply's end ({event.status})"
            )
            max_tokens = self.request.sampling.max_tokens
            limit = f" ({max_tokens} tokens)" if event.status == MessageStatus.LENGTH and max_tokens else ""
            metrics = {**metrics, "tool_note": f"the model's tool call was cut off by {why}{limit} and did not run"}
            self._note_raw(event.text, [])
        rest = ""
        if gate is not None and (content is None or cut):
            rest = text[len(gate.sent) :] if text.startswith(gate.sent) else ""
        out: list[TurnEvent] = []
        if rest:
            self.writer.append(rest)
            out.append(TextEvent(rest, time.perf_counter()))
        return [*out, self._end_reply(replace(event, text=text, metrics=metrics))]

    def answer(self, call_id: str, verdict: str) -> None:
        """The person's answer (app.mcp.approval ALLOW_ONCE, ALWAYS or DENY) to the question of a
        ToolCallEvent, on the thread that polls; what follows comes with the next `poll`. An
        answer for a question no longer up (the turn was stopped) is ignored."""
        step = self._step
        if step is None or self.ended is not None or step.asking is None or step.asking[0].id != call_id:
            return
        step.answer(call_id, verdict)
        out: list[TurnEvent] = []
        step.take(out)
        self._out.extend(out + self._after_calls())

    @property
    def waiting_for(self) -> ToolCallEvent | None:
        """The call whose question is up, if any (a deferred loop)."""
        step = self._step
        if step is None or step.asking is None:
            return None
        call, request = step.asking
        return ToolCallEvent(call.id, call.name, call.arguments, server=request.server.name, question=request)

    @property
    def call_running(self) -> bool:
        """Whether a decided call runs on its worker now (a deferred loop: polls return meanwhile)."""
        step = self._step
        return step is not None and step.running is not None and step.running.outcome is None

    def _poll_step(self) -> list[TurnEvent]:
        """A deferred step's news: a Stop at the question ends the turn, a finished call is written."""
        step = self._step
        assert step is not None
        out: list[TurnEvent] = []
        if self._cancel.is_set() and step.asking is not None:
            step.drop_question()
        step.take(out)
        return out + self._after_calls()

    def _after_calls(self) -> list[TurnEvent]:
        """Once the step's calls are all written: the model is called again with their results
        (or, after a Stop, the turn ends cancelled)."""
        step = self._step
        if step is None or not step.done:
            return []
        self._step = None
        self.sent = [*(self.sent or []), self._step_reply, *step.results]
        self._failed |= step.failed
        writer: Any = self.writer
        writer.next_reply()
        if self._cancel.is_set():
            return [self._write(end_status(MessageStatus.CANCELLED, self.stop_cause), {}, None, "", before_reply=False)]
        assert self.backend is not None and self.tools is not None
        if self._answering:  # the answer, from the calls that worked, without tools (app/turn/answer_step.py)
            self.sent = answer_messages(self.sent, self._failed)
            request = self.request.but(messages=self.sent, grammar=NO_CALL_FIRST, tools=None)
        else:
            request = self.request.but(messages=self.sent, tools=self.tools.offer(first=False))
        try:
            self._generation = self.backend.start(request)
        except EXPECTED as exc:
            return [self._write(MessageStatus.ERROR, {}, str(exc), None, before_reply=False)]
        self._first_text = False
        return []

    def cancel(self, cause: StopCause = StopCause.PERSON) -> None:
        """Stop the reply (while the model still loads: as soon as it starts). Any thread."""
        if self.stop_cause is None or cause > self.stop_cause:
            self.stop_cause = cause
        self._cancel.set()
        generation = self._generation
        if generation is not None:
            generation.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @property
    def started(self) -> bool:
        """The reply was started (a Generation exists)."""
        return self._generation is not None

    def cancel_before_start(self) -> EndEvent:
        """End as stopped while the model loaded (Ctrl-C, a signal): nothing was generated;
        'cancelled', or 'interrupted' for a signal."""
        if self._generation is not None:
            self._generation.cancel()
        return self._write(end_status(MessageStatus.CANCELLED, self.stop_cause), {}, None, None, before_reply=False)

    def end_reply(self, event: FinishedEvent) -> EndEvent:
        """End with what an engine would have said (Stop while a question was up: nothing was sent)."""
        return self._end_reply(event)

    def fail(self, error: str) -> EndEvent:
        """End as an error before (or without) a reply: the person's message stays, the reply says why."""
        return self._write(MessageStatus.ERROR, {}, error, None, before_reply=self._generation is None)

    def abandon(self, grace_s: float) -> EndEvent:
        """On quit: stop the reply, wait up to `grace_s` for its end, keep its text as 'interrupted'."""
        self.cancel(StopCause.QUIT)
        deadline = time.monotonic() + grace_s
        thread = self._thread
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.05)  # still loading the model or starting the reply
        step, self._step = self._step, None
        if step is not None:  # between replies: a call on its worker is written if it ends in time
            step.quit(max(0.0, deadline - time.monotonic()))
            writer: Any = self.writer
            writer.next_reply()
            return self._write(end_status(MessageStatus.COMPLETE, StopCause.QUIT), {}, None, "", before_reply=False, give_back=False)
        generation = self._generation
        events: list[Any] = []
        if generation is not None:
            try:
                generation.wait(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                pass
            events = generation.take_ready()
        parts = [e.text for e in events if isinstance(e, TextEvent)]
        final = next((e for e in events if isinstance(e, FinishedEvent)), None)
        if final is not None:  # its text without its reasoning, which the writer keeps
            final = self._reasoned_end(final)[1]
        text = final.text if final is not None else self.writer.text + "".join(parts)
        metrics = dict(final.metrics) if final is not None else {}
        return self._write(end_status(MessageStatus.COMPLETE, StopCause.QUIT), metrics, None, text, before_reply=False, give_back=False)

    def _end_reply(self, event: FinishedEvent) -> EndEvent:
        metrics: dict[str, Any] = dict(event.metrics)
        metrics["turn_ms"] = round((time.perf_counter() - self.t0) * 1000.0, 1)
        return self._write(end_status(event.status, self.stop_cause), metrics, event.error, event.text, before_reply=False)

    def _write(
        self, status: str, metrics: dict[str, Any], error: str | None, text: str | None, *, before_reply: bool, give_back: bool = True
    ) -> EndEvent:
        """Write the end once; the engine goes back to its lender (but not at quit)."""
        assert self.ended is None, "a turn ends once"
        self.writer.sent = self.sent
        lease, self._lease = self._lease, None
        if lease is not None and self.gate is not None and give_back:
            self.gate.give_back(lease)
        started, failure = self._engine_said(status)
        try:
            end = EndEvent(
                self.writer.finish(status, metrics, error, text=text), before_reply=before_reply, started=started, failure=failure
            )
        except ReplyNotSaved as exc:
            assert self.writer.unsaved is not None
            end = EndEvent(self.writer.unsaved, before_reply=before_reply, not_saved=exc, started=started, failure=failure)
        self.ended = end
        return end

    def _engine_said(self, status: str) -> tuple[StartedInfo | None, Failure | None]:
        """What only the engine knows of the reply: the prompt's figures as it started, and why a
        reply that ended as an error failed."""
        generation = self._generation
        if generation is None:
            return None, None
        engine = generation.finished
        started = engine.started if engine is not None and engine.started is not None else generation.started
        failure = engine.failure if engine is not None and status == MessageStatus.ERROR else None
        return started, failure

    def first_figures(self) -> dict[str, Any] | None:
        return first_figures(self._generation)
