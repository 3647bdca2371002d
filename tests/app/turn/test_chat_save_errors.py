"""`cove chat`'s turn when the history file stops taking writes mid-reply (a full disk): the
error says exactly what the file keeps (the message, the reply up to its last checkpoint),
and a retry writes the rest once there is room."""

from __future__ import annotations

import re

import pytest

from app.settings import SamplingParams
from app.store.save_errors import ReplyNotSaved
from app.turn.service import ChatService


def test_a_full_disk_mid_reply_says_what_was_kept(cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "2000")
    monkeypatch.setenv("FAKE_HOST_WORDS", "500")
    history = cove_core.history
    conversation = history.create_conversation(model="tiny-llama")
    model = cove_core.library.get("tiny-llama")
    seen: list[str] = []

    def on_text(text: str) -> None:
        seen.append(text)
        if len(seen) == 60:  # a few checkpoints in: the disk fills up
            pages = cove_core.db.conn.execute("PRAGMA page_count").fetchone()[0]
            cove_core.db.conn.execute(f"PRAGMA max_page_count = {pages}")

    service = ChatService(history, fake_engine, library=cove_core.library, checkpoint_interval_s=0.0)
    with pytest.raises(ReplyNotSaved) as raised:
        service.send(conversation.id, "tell me a long story", model=model, params=SamplingParams(max_tokens=500), on_text=on_text)
    sentence = str(raised.value)
    assert sentence.startswith("the disk is full: your message and the first ")
    saved, total = map(int, re.search(r"first (\d+) of the reply's (\d+) characters", sentence).groups())
    messages = history.messages(conversation.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].content == "tell me a long story"
    assert len(messages[1].content) == saved and 0 < saved < total
    assert total == len("".join(seen))
    assert "nothing was changed" not in sentence
