"""One reply being generated, as the caller sees it: a thread-safe stream of events.

The engine side (the client's reader thread) feeds it; any thread may iterate it, wait for
it or cancel it. It always ends with exactly one FinishedEvent, whatever happens to the
engine (the client guarantees that), so a consumer never hangs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StartedInfo:
    prompt_tokens: int
    cached_tokens: int
    dropped_turns: int
    prefill_ms: float | None = None
    template_source: str = ""
    tool_format: str = ""  # the tool-call family of the reply (app/tools/families.py); "" without tools
    reasoning: str = ""  # what the reply starts in (app/reasoning/style.py MODES); "" when it does not reason


@dataclass(frozen=True)
class TokenEvent:
    text: str
    t: float  # time.perf_counter() when the text reached this process


@dataclass(frozen=True)
class Failure:
    """Why a reply ended as an error, for a caller that answers in numbers (an API server)."""

    kind: str  # the host's Failed.kind ("context", "grammar", "generate", ...) or "crash" | "restart"
    # kind "context": the prompt's tokens (a lower bound when at_least), the model's context,
    # and the tokens kept free for the reply
    prompt_tokens: int | None = None
    n_ctx: int | None = None
    reserve: int | None = None
    at_least: bool = False


@dataclass(frozen=True)
class FinishedEvent:
    text: str
    status: str  # one of ENGINE_STATUSES (a MessageStatus)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    started: StartedInfo | None = None
    failure: Failure | None = None  # set when status is "error"

    @property
    def error_kind(self) -> str | None:
        return self.failure.kind if self.failure is not None else None


@dataclass(frozen=True)
class Serving:
    """What the engine is doing: replies being decoded together, replies waiting for a slot, the
    tokens generated per second over all of them (last ~2 s), and its slots."""

    sequences: int = 0
    waiting: int = 0
    tokens_per_s: float = 0.0
    slots: int = 0


class Generation:
    """Iterate for TokenEvents then one FinishedEvent; `wait()` for the end; `cancel()` any time."""

    def __init__(self, request_id: str, on_cancel: Callable[[Generation], None]) -> None:
        self.request_id = request_id
        self.t_request = time.perf_counter()
        self.started: StartedInfo | None = None
        self._on_cancel = on_cancel
        self._events: queue.SimpleQueue[TokenEvent | FinishedEvent] = queue.SimpleQueue()
        self._parts: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._finished: FinishedEvent | None = None
        self._end_consumed = False
        self._cancel_requested = False
        self.ttft_ms: float | None = None
        # Set by the client: the host process this request was sent to (None until sent).
        self.host: object | None = None
        self._waker: Callable[[], None] | None = None  # armed by wake_when_ready, fired once

    # ---- consumer side ------------------------------------------------------------------

    def __iter__(self) -> Generation:
        return self

    def __next__(self) -> TokenEvent | FinishedEvent:
        # A method rather than a generator: a KeyboardInterrupt while waiting leaves the
        # iteration usable (the caller can cancel() and keep reading to the end).
        if self._end_consumed:
            raise StopIteration
        while True:
            try:
                event = self._events.get(timeout=0.25)
                break
            except queue.Empty:
                continue
        if isinstance(event, FinishedEvent):
            self._end_consumed = True
        return event

    def take_ready(self) -> list[TokenEvent | FinishedEvent]:
        """The events that have arrived, without waiting (a UI thread polls this once a frame,
        so no thread has to wake for each token just to pass it on)."""
        events: list[TokenEvent | FinishedEvent] = []
        while not self._end_consumed:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            events.append(event)
            if isinstance(event, FinishedEvent):
                self._end_consumed = True
        return events

    def wake_when_ready(self, waker: Callable[[], None]) -> bool:
        """Call `waker` once, from the thread that delivers the next event, instead of having a
        thread block in `next()`. Returns False (and arms nothing) when an event is ready now:
        take it with `take_ready`. An event loop waits this way without a thread of its own."""
        self._waker = waker
        if self._events.empty() or self._end_consumed:
            return not self._end_consumed
        self._waker = None
        return False

    def _wake(self) -> None:
        waker, self._waker = self._waker, None
        if waker is not None:
            waker()

    def wait(self, timeout: float | None = None) -> FinishedEvent:
        """Block until the reply has ended; returns its FinishedEvent (does not consume events)."""
        if not self._done.wait(timeout):
            raise TimeoutError("the reply has not finished yet")
        assert self._finished is not None
        return self._finished

    def cancel(self) -> None:
        """Stop the reply; it ends as 'cancelled' with the text so far. Safe from any thread."""
        with self._lock:
            if self._done.is_set() or self._cancel_requested:
                return
            self._cancel_requested = True
        self._on_cancel(self)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    @property
    def finished(self) -> FinishedEvent | None:
        return self._finished

    @property
    def text(self) -> str:
        """The text received so far."""
        with self._lock:
            return "".join(self._parts)

    # ---- the feeding side (the engine client, a remote engine) -----------------------------

    def set_started(self, info: StartedInfo) -> None:
        """What the engine said as the reply started (its prompt's figures)."""
        self.started = info

    def add_token(self, text: str) -> None:
        """A piece of the reply's text (dropped after the end)."""
        now = time.perf_counter()
        with self._lock:
            if self._done.is_set():
                return
            if self.ttft_ms is None and text:
                self.ttft_ms = (now - self.t_request) * 1000.0
            self._parts.append(text)
        self._events.put(TokenEvent(text, now))
        self._wake()

    def end(self, text: str | None, status: str, metrics: dict[str, Any], error: str | None, failure: Failure | None = None) -> bool:
        """End the reply once; later calls are ignored. `text=None` keeps the text so far."""
        with self._lock:
            if self._done.is_set():
                return False
            final = "".join(self._parts) if text is None else text
            event = FinishedEvent(final, status, metrics, error, self.started, failure)
            self._finished = event
            self._done.set()
        self._events.put(event)
        self._wake()
        return True
