"""Where a turn writes: the interface `TurnRecord` (app/turn/record.py) implements for the window and
`cove chat`, on the thread that owns the history. Another driver (the API, with its own store
thread) passes a writer of its own."""

from __future__ import annotations

from typing import Any, Protocol

from app.store.history import Message
from models.library import FileRecheck, InstalledModel, ModelLibrary


class TurnWriter(Protocol):
    """The history side of one turn. Called only from the thread that drives the turn."""

    assistant: Message  # the reply's row, 'streaming' while it runs
    sent: list[dict] | None  # the messages sent to the model, for the record (set at the end)
    ran_on: dict[str, Any] | None  # where a server's reply runs; None for this machine
    unsaved: Message | None  # the finished reply, when `finish` could not write it

    @property
    def text(self) -> str: ...

    def append(self, text: str) -> None:
        """Text of the reply as it arrives (checkpointed now and then)."""

    def finish(self, status: str, metrics: dict[str, Any], error: str | None = None, text: str | None = None) -> Message:
        """Write the end; raises ReplyNotSaved when the history cannot take it (`unsaved` keeps it)."""
        ...

    def record_recheck(self, library: ModelLibrary, model_name: str, recheck: FileRecheck) -> InstalledModel:
        """The model file changed: its entry and this reply name its new bytes."""
        ...
