"""The engine side of one turn, off the UI thread: load the model if needed and start the
reply, or, for a model on one of the person's servers, open its stream through the RemoteEngine
the UI thread built for the turn (no load, no engine gate). Loading, consent and failure events
go into a deque; once the reply has started, the UI thread takes its tokens from the
Generation itself, once a frame, and this thread ends.

Threading invariant: this thread never touches Qt objects or the database; it only appends
to the deque (thread-safe) and calls the engine client (thread-safe).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.chat import start_generation
from app.engine.client import EngineClient, EngineError, FinishedEvent, Generation, LoadedModel, TokenEvent
from app.load_options import LoadOptions
from app.remote.connections import ConnectionProblem
from app.remote.errors import RemoteProblem
from app.remote.privacy import ConsentNeeded
from app.remote.remote_model import RemoteModel
from app.serve.pool import Lease
from app.serve.window_gate import WindowGate
from app.settings import SamplingParams
from app.store.statuses import MessageStatus
from models.library import FileRecheck, InstalledModel
from models.network import NetworkRefused
from ui.chat.remote_turn import ConsentEvent


@dataclass(frozen=True)
class LoadedEvent:
    loaded: LoadedModel


@dataclass(frozen=True)
class FailedEvent:
    error: str


@dataclass(frozen=True)
class RecheckedEvent:
    """The model file's size or mtime changed, so it was hashed again before loading."""

    recheck: FileRecheck


TurnEvent = LoadedEvent | RecheckedEvent | ConsentEvent | TokenEvent | FinishedEvent | FailedEvent


class TurnWorker(threading.Thread):
    """`messages` may be a callable, run on this thread, that builds the prompt messages (it
    reads the conversation through its own read-only connection, so a long history costs the
    UI thread nothing). `remote`: the RemoteEngine of a RemoteModel's turn."""

    def __init__(
        self,
        engine: EngineClient,
        messages: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]],
        *,
        model: InstalledModel | RemoteModel,
        params: SamplingParams,
        conversation_id: str,
        options: LoadOptions | None = None,
        gate: WindowGate | None = None,
        remote: Any | None = None,
    ) -> None:
        super().__init__(name="cove-turn", daemon=True)
        self.remote = remote  # app.remote.engine.RemoteEngine: the reply streams from a server
        # The server's pool, while the server runs in the window and shares this engine (a
        # remote turn needs no engine of this machine).
        self._gate = gate if remote is None else None
        self._lease: Lease | None = None
        self._options = options  # the model's load settings, resolved on the UI thread
        self.events: deque[TurnEvent] = deque()
        self._engine = engine
        self._messages = messages
        self._model = model
        self._params = params
        self._conversation_id = conversation_id
        self._generation: Generation | None = None
        self._cancel = threading.Event()
        self.sent: list[dict] | None = None  # the messages as sent to the engine, once built

    def run(self) -> None:
        try:
            messages = self._messages() if callable(self._messages) else self._messages
            self.sent = messages
            if self._gate is not None and isinstance(self._model, InstalledModel):  # a gate only for this machine's models
                self._lease = self._gate.borrow(self._model, messages, self._cancel.is_set)
                if self._lease is None and self._cancel.is_set():  # stopped while an API request used the engine
                    self.events.append(FinishedEvent("", MessageStatus.CANCELLED, {}))
                    return
            generation = start_generation(
                self._engine,
                messages,
                model=self._model,
                params=self._params,
                conversation_id=self._conversation_id,
                options=self._options,
                on_loaded=lambda loaded: self.events.append(LoadedEvent(loaded)),
                on_recheck=lambda recheck: self.events.append(RecheckedEvent(recheck)),
                remote=self.remote,
            )
        except ConsentNeeded as exc:  # nothing was sent: the UI thread asks the person first
            self.events.append(ConsentEvent(exc.host, exc.connection or str(getattr(self._model, "connection", ""))))
            return
        except (EngineError, RemoteProblem, NetworkRefused, ConnectionProblem) as exc:
            self.events.append(FailedEvent(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - e.g. the history could not be read: a sentence, not a hang
            self.events.append(FailedEvent(f"the conversation could not be prepared for the model ({exc})"))
            return
        self._generation = generation
        if self._cancel.is_set():
            generation.cancel()

    def take_events(self) -> list[TurnEvent]:
        """Everything that has happened since the last call, without waiting: recheck, loading and
        failure events first, then the reply's tokens and, at its end, exactly one FinishedEvent."""
        out: list[TurnEvent] = []
        while self.events:
            out.append(self.events.popleft())
        generation = self._generation
        if generation is not None:
            out.extend(generation.take_ready())
        return out

    def first_figures(self) -> dict[str, Any] | None:
        """What the reply's first token made known, in the keys of its final metrics: the time to
        first token, the prompt's tokens (and those reused) and its reading speed; None before the
        first token (or for a stream that does not report them)."""
        generation = self._generation
        ttft = getattr(generation, "ttft_ms", None)
        if ttft is None:
            return None
        figures: dict[str, Any] = {"ttft_ms": round(ttft, 3)}
        started = getattr(generation, "started", None)
        if started is not None:
            figures["prompt_tokens"], figures["cached_tokens"] = started.prompt_tokens, started.cached_tokens
            if started.prefill_ms:  # as the engine's final prompt_tps: tokens read over prefill time
                read = started.prompt_tokens - started.cached_tokens
                figures["prompt_tps"] = round(read / (started.prefill_ms / 1000.0), 2)
        return figures

    def give_back(self, reply: str) -> None:
        """The reply has ended: the engine goes back to the server's pool, if it came from it."""
        lease, self._lease = self._lease, None
        if lease is not None and self._gate is not None:
            self._gate.give_back(lease, self.sent or [], reply)

    def wait_for_end(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the started reply to end (no-op if none started)."""
        generation = self._generation
        if generation is not None:
            try:
                generation.wait(timeout)
            except TimeoutError:
                pass

    def cancel(self) -> None:
        """Stop the reply (or, while the model is still loading, stop it as soon as it starts)."""
        self._cancel.set()
        generation = self._generation
        if generation is not None:
            generation.cancel()

    @property
    def model(self) -> InstalledModel | RemoteModel:
        return self._model

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

