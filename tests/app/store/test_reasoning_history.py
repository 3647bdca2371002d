"""A reply's reasoning in the history: the migration that adds `messages.reasoning` (a file at the
previous version keeps its rows, each with no reasoning), the finished reply keeping it apart from
its text, and the next prompt carrying it for the template to decide on (app/turn/prompt.py). The window's
and `cove chat`'s turn writes it through TurnRecord, on a replayed Qwen3 output."""

from __future__ import annotations

import sqlite_utils

from app.engine.generation import Generation, StartedInfo
from app.engine.request import ReplyRequest
from app.reasoning.style import MODE_THINK
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.history import History
from app.store.migrations import MIGRATIONS, apply_migrations
from app.store.request_log import RequestLog
from app.turn.events import EndEvent, ReasoningEvent, TextEvent
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.turn import Turn
from tests.app.reasoning.test_split import QWEN3


def test_the_migration_adds_reasoning_and_keeps_the_rows_of_the_previous_version(tmp_path) -> None:
    db = sqlite_utils.Database(tmp_path / "cove.db")
    apply_migrations(db, MIGRATIONS[: [n for n, _ in MIGRATIONS].index("0016_reasoning")])
    history = History(db)
    conversation = history.create_conversation()
    db.execute(
        "INSERT INTO messages (id, conversation_id, role, content, status, created_at, updated_at, params, "
        "metrics, seq) VALUES ('m1', ?, 'assistant', 'old reply', 'complete', '', '', '{}', '{}', 0)",
        [conversation.id],
    )
    db.conn.commit()
    assert apply_migrations(db, MIGRATIONS)[0] == "0016_reasoning"
    old = history.messages(conversation.id)[0]
    assert (old.content, old.reasoning) == ("old reply", "")


class _Scripted:
    """A Backend whose reply is a recorded Qwen3 output, streamed in pieces."""

    installed = None
    ran_on = None

    def __init__(self, model) -> None:
        self.model = model

    def start(self, request, **kwargs) -> Generation:
        gen = Generation("scripted", lambda g: None)
        gen.set_started(StartedInfo(9, 0, 0, 1.0, "gguf", "", MODE_THINK))
        for i in range(0, len(QWEN3), 4):
            gen.add_token(QWEN3[i : i + 4])
        gen.end(QWEN3, MessageStatus.COMPLETE, {"gen_tokens": 30}, None)
        return gen


def test_a_turn_keeps_the_reasoning_apart_in_the_row_the_record_and_the_next_prompt(cove_core) -> None:
    history = cove_core.history
    conversation = history.create_conversation()
    model = cove_core.library.list()[0]
    record = TurnRecord.begin(history, conversation.id, "What is the capital of France?", model=model, params=SamplingParams())
    asked = ReplyRequest.chat(
        [{"role": "user", "content": "What is the capital of France?"}],
        sampling=SamplingParams().sampling(),
        conversation_id=conversation.id,
    )
    turn = Turn(record, asked)
    turn.start(_Scripted(model))
    events = []
    while (event := turn.next_event()) is not None:
        events.append(event)
    thought = "".join(e.text for e in events if isinstance(e, ReasoningEvent))
    text = "".join(e.text for e in events if isinstance(e, TextEvent))
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == MessageStatus.COMPLETE
    assert thought == "The user asks for the capital of France. That is Paris."
    assert text == end.message.content == "The capital of France is Paris."  # never the reasoning
    saved = history.messages(conversation.id)[-1]
    assert saved.reasoning == thought and saved.content == text
    assert saved.metrics["reasoning_ms"] >= 0 and saved.metrics["reasoning_tokens"] > 0
    entry = RequestLog(cove_core.db).entries()[-1]
    assert entry["reply"] == text and thought in (entry["params"] or "")
    prompt = build_prompt_messages(history, conversation.id, None)
    assert prompt[-1] == {"role": "assistant", "content": text, "reasoning": thought}
