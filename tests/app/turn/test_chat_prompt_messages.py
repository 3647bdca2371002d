"""What the engine is sent of a conversation: a message the engine refused because it could
never fit the context is not sent again (it would push every earlier turn out of view)."""

from __future__ import annotations

from pathlib import Path

from app.store.database import close_database, open_database
from app.store.history import History
from app.turn.prompt import build_prompt_messages


def _turn(history: History, conversation_id: str, text: str, reply: str, *, status: str = "complete", metrics=None, error=None) -> None:
    user = history.add_user_message(conversation_id, text)
    row = history.start_assistant_message(
        conversation_id, parent_id=user.id, model_name="m", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(row.id, reply, status=status, metrics=metrics or {}, error=error)


def test_a_message_refused_as_too_long_for_the_context_is_not_sent_again(tmp_path: Path) -> None:
    opened = open_database(tmp_path / "cove.db")
    try:
        history = History(opened.db)
        conversation = history.create_conversation()
        _turn(history, conversation.id, "first question", "first answer")
        _turn(
            history,
            conversation.id,
            "x" * 100_000,
            "",
            status="error",
            metrics={"error_kind": "context"},
            error="your message is at least 30000 tokens; the context holds 8192",
        )
        _turn(history, conversation.id, "a crash", "", status="error", metrics={"error_kind": "generate"}, error="the engine stopped")
        _turn(
            history,
            conversation.id,
            "y" * 50_000,
            "",
            status="error",
            metrics={"error_kind": "remote-context"},
            error="gpu-box refused the conversation as too long for the model's context (HTTP 400)",
        )
        _turn(
            history,
            conversation.id,
            "while the server was down",
            "",
            status="error",
            metrics={"error_kind": "remote-unreachable"},
            error="gpu-box did not answer",
        )
        latest = history.add_user_message(conversation.id, "shorter, then")
        sent = build_prompt_messages(history, conversation.id, "Be brief.", upto=latest.id)
        assert sent == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "a crash"},  # another failure: the message itself was fine
            {"role": "user", "content": "while the server was down"},
            {"role": "user", "content": "shorter, then"},
        ]
    finally:
        close_database(opened.db)
