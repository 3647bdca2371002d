"""SIGTERM and SIGHUP during a blocking turn (`cove chat`): the reply is stopped as by Ctrl-C,
finished by the engine with its figures, kept as `interrupted`, and the turn says which
signal ended it (the command exits 128 + that number)."""

from __future__ import annotations

import os
import signal

import pytest

from app.settings import SamplingParams
from app.termination import raise_on_termination, restore
from app.turn.service import ChatService


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminating_signal_mid_reply_keeps_it_as_interrupted(cove_core, fake_engine, monkeypatch, signum):
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")
    history = cove_core.history
    conversation = history.create_conversation(model="tiny-llama")
    pieces: list[str] = []

    def on_text(text: str) -> None:
        pieces.append(text)
        if len(pieces) == 5:
            os.kill(os.getpid(), signum)  # the handler raises in this thread, as in cove chat
        if len(pieces) == 6:
            os.kill(os.getpid(), signum)  # a second signal while the reply is being stopped is ignored

    previous = raise_on_termination()
    try:
        result = ChatService(history, fake_engine, library=cove_core.library).send(
            conversation.id,
            "a long story",
            model=cove_core.library.get("tiny-llama"),
            params=SamplingParams(max_tokens=400),
            on_text=on_text,
        )
    finally:
        restore(previous)
    assert result.terminated_by == signum
    assert result.status == "interrupted"
    saved = history.get_message(result.assistant_message.id)
    assert saved.status == "interrupted" and saved.content.startswith("".join(pieces[:5]))
    assert 5 <= saved.metrics["gen_tokens"] < 400
