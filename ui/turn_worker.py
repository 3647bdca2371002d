"""The engine side of one turn, off the UI thread: load the model if needed, start the
reply, and pass its events into a deque that the UI thread drains once per frame.

Threading invariant: this thread never touches Qt objects or the database; it only appends
to the deque (thread-safe) and calls the engine client (thread-safe).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from app.chat import start_generation
from app.engine.client import EngineClient, EngineError, FinishedEvent, Generation, LoadedModel, TokenEvent
from app.settings import SamplingParams
from models.library import InstalledModel


@dataclass(frozen=True)
class LoadedEvent:
    loaded: LoadedModel


@dataclass(frozen=True)
class FailedEvent:
    error: str


TurnEvent = LoadedEvent | TokenEvent | FinishedEvent | FailedEvent


class TurnWorker(threading.Thread):
    def __init__(
        self,
        engine: EngineClient,
        messages: list[dict[str, Any]],
        *,
        model: InstalledModel,
        params: SamplingParams,
        conversation_id: str,
    ) -> None:
        super().__init__(name="cove-turn", daemon=True)
        self.events: deque[TurnEvent] = deque()
        self._engine = engine
        self._messages = messages
        self._model = model
        self._params = params
        self._conversation_id = conversation_id
        self._generation: Generation | None = None
        self._cancel = threading.Event()

    def run(self) -> None:
        try:
            generation = start_generation(
                self._engine,
                self._messages,
                model=self._model,
                params=self._params,
                conversation_id=self._conversation_id,
                on_loaded=lambda loaded: self.events.append(LoadedEvent(loaded)),
            )
        except EngineError as exc:
            self.events.append(FailedEvent(str(exc)))
            return
        self._generation = generation
        if self._cancel.is_set():
            generation.cancel()
        for event in generation:
            self.events.append(event)  # TokenEvent ... then exactly one FinishedEvent

    def cancel(self) -> None:
        """Stop the reply (or, while the model is still loading, stop it as soon as it starts)."""
        self._cancel.set()
        generation = self._generation
        if generation is not None:
            generation.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()
