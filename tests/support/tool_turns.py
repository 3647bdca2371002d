"""Tool-calling turns on the suite's models, shared by the tool-loop tests (tests/app/turn/) and the
window's tool tests (tests/ui/tools/): a backend that replays a model's real outputs through the
scripted fake engine host, one that ends each reply at its token limit, a Qwen-style call to the
fault server's `echo`, and the tiny model set up to call tools (Qwen 2.5's template, its '"' token)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from app.engine.client import FinishedEvent
from app.engine.request import ReplyRequest
from app.statuses import MessageStatus
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import tiny_vocab

CALL = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi from the tool"}}\n</tool_call>'

# Qwen 2.5's (Hermes-style) chat template, for the tiny model written to call tools.
QWEN_TEMPLATE = REPO_ROOT / "tests" / "data" / "chat_templates" / "qwen2.5-instruct.jinja"
QUOTE_TOKEN = tiny_vocab()[0].index('"')  # the '"' token of the tiny model


class ScriptedBackend:
    """The fake host's backend, each reply's pieces written to FAKE_HOST_PIECES as it starts
    (the host reads the file per request): a model's real outputs, one reply after another."""

    def __init__(self, inner: Any, pieces_file: Path, replies: list[list[str]]) -> None:
        self.inner, self.pieces_file, self.replies = inner, pieces_file, replies
        self.sent: list[list[dict]] = []
        self.tools_given: list[Any] = []
        self.grammars: list[str | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def start(self, request: ReplyRequest, **kwargs: Any) -> Any:
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        self.pieces_file.write_text(json.dumps(reply))
        self.sent.append(request.message_dicts())
        offer = request.tools
        self.tools_given.append((list(offer.tools), offer.choice) if offer is not None else (None, None))
        self.grammars.append(request.grammar)
        return self.inner.start(request, **kwargs)


class LengthBackend(ScriptedBackend):
    """Each reply ends as an engine ends one at its token limit ('length')."""

    def start(self, request: ReplyRequest, **kwargs: Any) -> Any:
        return _AtLimit(super().start(request, **kwargs))


class _AtLimit:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def take_ready(self) -> list:
        return [dataclasses.replace(e, status=MessageStatus.LENGTH) if isinstance(e, FinishedEvent) else e for e in self.inner.take_ready()]


def split_text(text: str, size: int = 7) -> list[str]:
    """`text` as the pieces a model streams, `size` characters each."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def calls_made(path: Path) -> list[str]:
    """The names of the calls that reached the fault server, from the file it notes them in."""
    return path.read_text().split()


def run_turn(
    core: Any, engine: Any, pieces: Path, loop: Any, replies: list[list[str]], conversation: Any, text: str
) -> tuple[Any, Any, list, ScriptedBackend]:
    """One turn with `loop`'s tools in `conversation` on the tiny model, its replies replayed by
    the scripted fake host, driven to its end: (the TurnRecord, the Turn, its events, the backend)."""
    from app.settings import SamplingParams
    from app.turn.backend import backend_for
    from app.turn.prompt import build_prompt_messages
    from app.turn.record import TurnRecord
    from app.turn.turn import Turn

    model = core.library.get("tiny-llama")
    params = SamplingParams(max_tokens=400)
    record = TurnRecord.begin(core.history, conversation.id, text, model=model, params=params)
    messages = build_prompt_messages(core.history, conversation.id, None, upto=record.user.id)
    asked = ReplyRequest.chat(messages, sampling=params.sampling(), conversation_id=conversation.id)
    turn = Turn(record, asked, library=core.library, tools=loop)
    backend = ScriptedBackend(backend_for(model, engine=engine), pieces, replies)
    turn.start(backend)
    events = []
    while (event := turn.next_event()) is not None:
        events.append(event)
    return record, turn, events, backend
