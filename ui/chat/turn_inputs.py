"""What a window turn reads from outside its runner, in one place: `TurnInputs`.

`ChatController` makes it with its own readers (the settings, a model's load settings, the open
conversation) and fills the rest as the window's features register through it
(`ChatController.provide_tools`, `provide_documents`, `provide_engine_gate`); `TurnRunner` reads
it and nothing else outside itself. An input no feature provided means "none" (no tools, no
documents, the window's own engine). All of it is read on the UI thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.docs.turn_sources import TurnDocuments
from app.load_options import LoadOptions
from app.serve.pool.window_gate import WindowGate
from app.settings import SamplingParams
from app.turn.tools import ToolLoop
from models.library import InstalledModel

# How a turn of a conversation gets its tools: None (no tools), or how its thread builds the loop.
ToolsFor = Callable[[str], Callable[[], ToolLoop | None] | None]
# The documents of a turn of a conversation (app/docs/turn_sources.py); None: no documents.
DocumentsFor = Callable[[str], TurnDocuments | None]
# The gate a turn borrows the engine through while the Server switch's pool shares it; None: the engine is the window's own.
EngineGate = Callable[[], WindowGate | None]


def no_tools(_conversation_id: str) -> None:
    return None


def no_documents(_conversation_id: str) -> None:
    return None


def own_engine() -> None:
    return None


@dataclass(frozen=True)
class TurnInputs:
    """Each a reader, called when the turn needs it:

    - `params`: the open conversation's sampling settings, at `begin` and at each launch;
    - `options`: a model's load settings, at each launch of a model of this machine;
    - `conversation_id`: the open conversation, at the relaunch after the consent question;
    - `gate`: at each launch of a model of this machine (the Server switch's servers provide it);
    - `tools_for`: at `begin`, the conversation's tools (the Tools feature provides them);
    - `docs_for`: at `begin`, the conversation's documents (the Documents feature provides them);
    - `notes`: sentences a turn's thread leaves for the person (a tool server that did not
      start), taken once per frame and shown; the tools' own notes once they are provided.
    """

    params: Callable[[], SamplingParams]
    options: Callable[[InstalledModel], LoadOptions]
    conversation_id: Callable[[], str | None]
    gate: EngineGate = own_engine
    tools_for: ToolsFor = no_tools
    docs_for: DocumentsFor = no_documents
    notes: deque[str] = field(default_factory=deque)
