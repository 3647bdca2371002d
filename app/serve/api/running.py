"""`Running`: an API request's Turn (app/turn/turn.py) as the endpoints read it, on the server's
event loop: the Turn's own events, in its vocabulary (app/turn/events.py), as the window and the
command line read them: the reply's text as TextEvents and its reasoning as ReasoningEvents
(before the text they precede; app/reasoning), each joined into chunks, then one EndEvent, the
reply as the Turn wrote it (its status from app/turn/status.py) with the engine's figures of the
prompt and why it failed; with no thread blocked waiting."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable

import anyio

from app.engine.generation import Generation
from app.tools.reply import ToolReply
from app.turn.events import EndEvent, ReasoningEvent, TextEvent, TurnEvent
from app.turn.turn import Turn

# What an endpoint reads of a reply: its text, its reasoning, and its end.
ReplyEvent = TextEvent | ReasoningEvent | EndEvent

CHUNK_INTERVAL_S = 0.02  # a stream sends at most one chunk this often; tokens arriving faster are joined


class Running:
    """One reply in progress: `await next()` gives its events, None after the last. Tokens that
    arrived together come as one event, and a stream faster than one token per CHUNK_INTERVAL_S
    sends what arrived meanwhile as one chunk: the server's work per chunk runs in the window's
    process when the Server switch is on, and a thousand chunks a second would take the window's
    main thread its turns at the interpreter. The first token goes out at once.

    Events come from `turn.poll()` (which writes them: text checkpointed, the end kept for the
    request's close), called only here on the event loop; `generation` is the reply the turn
    started, waited on with `wake_when_ready`. `first`: what the poll right after the start gave."""

    def __init__(self, turn: Turn, generation: Generation, first: Iterable[TurnEvent] = ()) -> None:
        self.turn = turn
        self.generation = generation
        self.ended: EndEvent | None = None  # the end, once taken
        self.text: list[str] = []
        self.reasoning: list[str] = []  # the reply's reasoning so far, as it went out
        self.tokens = 0  # tokens so far (events before they were joined)
        self._ready: deque[ReplyEvent] = deque()
        self._take(first)
        self._last_chunk = 0.0
        self._arrived: asyncio.Event | None = None
        # A stream's reply is closed (engine given back, request recorded) as soon as its last
        # event is taken, before the stream's last chunks go out: a client that sends its next
        # request on [DONE] never waits behind this one's commit.
        self.close_early: Callable[[], Awaitable[None]] | None = None
        # Set when the reply ended: why it is not (yet) in the history file, None when it is.
        self.not_saved: str | None = None
        # Set when a reply with tools ended: its calls as read once, for the record and the endpoint.
        self.tool_reply: ToolReply | None = None

    def _take(self, events: Iterable[TurnEvent]) -> None:
        """The turn's events the endpoints read: text, reasoning, and its end."""
        for event in events:
            if isinstance(event, (TextEvent, ReasoningEvent, EndEvent)):
                self._ready.append(event)

    @property
    def reasoning_text(self) -> str:
        """The reply's whole reasoning: what the turn wrote once it ended, what went out before."""
        ended = self.turn.ended
        return ended.message.reasoning if ended is not None else "".join(self.reasoning)

    async def next(self) -> ReplyEvent | None:
        if self.ended is not None:
            return None
        ready = self._ready
        if not ready:
            self._take(self.turn.poll())
        while not ready:  # wait for the engine's next event on the loop, with no thread blocked
            wake, arrived = self._waker()
            armed = self.generation.wake_when_ready(wake)
            if armed:
                await arrived.wait()
                arrived.clear()
            self._take(self.turn.poll())
            if not armed and not ready:
                break
        if ready and isinstance(ready[0], (TextEvent, ReasoningEvent)):
            early = self._last_chunk + CHUNK_INTERVAL_S - time.perf_counter()
            if early > 0:
                await anyio.sleep(early)
                self._take(self.turn.poll())
            self._last_chunk = time.perf_counter()
        event = ready.popleft() if ready else None
        if isinstance(event, (TextEvent, ReasoningEvent)):
            kind = type(event)  # text and reasoning are joined apart, in the order they came
            self.tokens += 1
            if ready and type(ready[0]) is kind:
                parts = [event.text]
                while ready and type(ready[0]) is kind:
                    parts.append(ready.popleft().text)  # type: ignore[union-attr]
                    self.tokens += 1
                event = kind("".join(parts), event.t)
            (self.text if kind is TextEvent else self.reasoning).append(event.text)
        elif isinstance(event, EndEvent):
            self.ended = event
        else:  # the engine's events ended without its end
            self.ended = self.turn.ended or self.turn.fail("the engine stopped without a reply")
        if self.ended is not None and self.close_early is not None:
            close, self.close_early = self.close_early, None
            await close()
        return event if event is not None else self.ended

    def _waker(self) -> tuple[Callable[[], None], asyncio.Event]:
        """What the engine's reader thread calls when an event arrives: set `_arrived` on this
        loop. A loop already closed (the server stopped) is no one's to wake."""
        loop = asyncio.get_running_loop()
        if self._arrived is None:
            self._arrived = asyncio.Event()
        arrived = self._arrived

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(arrived.set)
            except RuntimeError:
                pass

        return wake, arrived

    async def whole(self) -> EndEvent:
        """Every event taken: the reply's end."""
        while await self.next() is not None:
            pass
        assert self.ended is not None
        return self.ended
