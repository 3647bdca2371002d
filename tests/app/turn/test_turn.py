"""The turn object (app/turn/) driven directly, with the scripted fake engine host: the events
in their order, what it writes (reply row and record entry), stopping it for each cause, a
failure before any reply, and a writer that is not the history (as the API's will be)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from app.engine.client import EngineError
from app.engine.generation import Generation
from app.engine.request import ReplyRequest
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.history import Message
from app.store.request_log import RequestLog
from app.turn.backend import backend_for, installed_model, on_server, ready_without_load
from app.turn.events import EndEvent, LoadedEvent, MetricsEvent, TextEvent
from app.turn.local_backend import LocalBackend
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.status import StopCause, end_status
from app.turn.turn import Turn

WAIT_S = 30.0


def _begin(core: Any, text: str = "hello there") -> tuple[TurnRecord, Turn]:
    model = core.library.get("tiny-llama")
    conversation = core.history.create_conversation(model=model.name)
    params = SamplingParams(max_tokens=400)
    record = TurnRecord.begin(core.history, conversation.id, text, model=model, params=params)
    messages = build_prompt_messages(core.history, conversation.id, None, upto=record.user.id)
    asked = ReplyRequest.chat(messages, sampling=params.sampling(), conversation_id=conversation.id)
    return record, Turn(record, asked, library=core.library)


def _drain(turn: Turn) -> list[Any]:
    events = []
    while (event := turn.next_event()) is not None:
        events.append(event)
    return events


def _poll_until(turn: Turn, done: Any) -> list[Any]:
    """Poll as a window frame does, until `done(events so far)`; never waits on a wall-clock figure."""
    events: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while not done(events):
        assert time.monotonic() < deadline, f"the turn did not get there: {events[-3:]}"
        events.extend(turn.poll())
        time.sleep(0.005)
    return events


def test_a_turn_streams_in_order_and_writes_its_row_and_record_entry(cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "12")
    record, turn = _begin(cove_core)
    turn.start(backend_for(cove_core.library.get("tiny-llama"), engine=fake_engine))
    events = _drain(turn)

    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "LoadedEvent" and kinds[-1] == "EndEvent" and kinds.count("EndEvent") == 1
    texts = [e for e in events if isinstance(e, TextEvent)]
    assert len(texts) == 12
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextEvent) and e.text)
    assert isinstance(events[first_text + 1], MetricsEvent) and events[first_text + 1].figures["ttft_ms"] > 0
    end = events[-1]
    assert isinstance(end, EndEvent) and end.not_saved is None and not end.before_reply
    saved = cove_core.history.get_message(record.assistant.id)
    assert saved.status == MessageStatus.COMPLETE == end.status
    assert saved.content == "".join(e.text for e in texts) == end.message.content
    assert "turn_ms" in saved.metrics and saved.metrics["gen_tokens"] == 12
    entry = RequestLog(cove_core.db).entries()[-1]
    assert entry["status"] == "complete" and entry["client"] == "this window"
    assert turn.next_event() is None  # nothing after the end


@pytest.mark.parametrize(("cause", "status"), [(StopCause.PERSON, "cancelled"), (StopCause.SIGNAL, "interrupted")])
def test_a_launched_turn_stopped_mid_reply_keeps_its_text(cove_core, fake_engine, monkeypatch, cause, status):
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")
    record, turn = _begin(cove_core)
    turn.launch(backend_for(cove_core.library.get("tiny-llama"), engine=fake_engine))
    events = _poll_until(turn, lambda seen: sum(isinstance(e, TextEvent) for e in seen) >= 5)
    turn.cancel(cause)
    events += _poll_until(turn, lambda seen: any(isinstance(e, EndEvent) for e in seen))
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == status
    saved = cove_core.history.get_message(record.assistant.id)
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert saved.status == status and saved.content == shown and 5 <= saved.metrics["gen_tokens"] < 400


def test_quitting_mid_reply_keeps_it_as_interrupted(cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_TPS", "200")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")
    record, turn = _begin(cove_core)
    turn.launch(backend_for(cove_core.library.get("tiny-llama"), engine=fake_engine))
    shown = _poll_until(turn, lambda seen: sum(isinstance(e, TextEvent) for e in seen) >= 3)
    end = turn.abandon(grace_s=WAIT_S)
    saved = cove_core.history.get_message(record.assistant.id)
    assert end.status == saved.status == "interrupted"
    assert saved.content.startswith("".join(e.text for e in shown if isinstance(e, TextEvent))) and saved.content


def test_a_failure_before_any_reply_is_one_sentence_and_the_message_stays(cove_core):
    record, turn = _begin(cove_core)

    class Broken(LocalBackend):
        def start(self, *args: Any, **kwargs: Any) -> Any:
            raise EngineError("the engine stopped: out of memory while loading tiny-llama")

    turn.start(Broken(cove_core.library.get("tiny-llama"), None))
    events = _drain(turn)
    assert len(events) == 1 and isinstance(events[0], EndEvent) and events[0].before_reply
    saved = cove_core.history.get_message(record.assistant.id)
    assert saved.status == "error" and saved.error.startswith("the engine stopped")
    assert cove_core.history.get_message(record.user.id).content == "hello there"


class ListWriter:
    """A writer that is not the history: what the API's request store will pass."""

    def __init__(self, assistant: Message) -> None:
        self.assistant = assistant
        self.sent: list[dict] | None = None
        self.ran_on = None
        self.unsaved: Message | None = None
        self.parts: list[str] = []
        self.finished: list[tuple[str, str]] = []

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def append(self, text: str) -> None:
        self.parts.append(text)

    def finish(self, status: str, metrics: dict, error: str | None = None, text: str | None = None) -> Message:
        self.finished.append((status, self.text if text is None else text))
        return replace(self.assistant, content=self.finished[-1][1], status=status, metrics=metrics, error=error)

    def record_recheck(self, *args: Any) -> Any:
        raise AssertionError("no library was given, so nothing is rechecked")


def test_a_turn_writes_through_any_writer(cove_core, fake_engine, monkeypatch):
    monkeypatch.setenv("FAKE_HOST_WORDS", "7")
    model = cove_core.library.get("tiny-llama")
    conversation = cove_core.history.create_conversation(model=model.name)
    record = TurnRecord.begin(cove_core.history, conversation.id, "hi", model=model, params=SamplingParams())
    writer = ListWriter(record.assistant)
    messages = [{"role": "user", "content": "hi"}]
    turn = Turn(writer, ReplyRequest.chat(messages, sampling=SamplingParams(max_tokens=50).sampling()))
    turn.start(backend_for(model, engine=fake_engine))
    events = _drain(turn)
    assert any(isinstance(e, LoadedEvent) for e in events)
    assert writer.sent == messages and len(writer.finished) == 1
    assert writer.finished[0] == ("complete", "".join(writer.parts)) and len(writer.parts) == 7
    # The history saw none of it: the reply row is still the one begin() made.
    assert cove_core.history.get_message(record.assistant.id).status == "streaming"


def test_one_status_mapping():
    assert end_status("complete", None) == "complete"
    assert end_status("cancelled", StopCause.PERSON) == "cancelled"
    assert end_status("cancelled", StopCause.SIGNAL) == "interrupted"
    assert end_status("complete", StopCause.SIGNAL) == "complete"  # it had ended before the signal
    assert end_status("complete", StopCause.QUIT) == "interrupted"


def test_the_model_kind_is_asked_of_the_backend_module(cove_core, fake_engine):
    from app.remote.remote_model import RemoteModel

    local = cove_core.library.get("tiny-llama")
    remote = RemoteModel(connection="box", model_id="m", host="10.0.0.2:8000", kind="vllm", context_length=4096)
    assert not on_server(local) and on_server(remote)
    assert installed_model(local) is local and installed_model(remote) is None
    assert ready_without_load(remote, None) and not ready_without_load(local, None)
    assert backend_for(local, engine=fake_engine).installed is local
    server = backend_for(remote, remote_engine=None)
    assert server.installed is None and server.ran_on == {
        "connection": "box",
        "host": "10.0.0.2:8000",
        "kind": "vllm",
        "model_id": "m",
        "fingerprint": None,
    }
    with pytest.raises(EngineError):
        server.start(ReplyRequest())


class _Recording:
    """A Backend that records the request each reply was started with, and the thread that started
    it; each reply ends at once."""

    installed = None
    ran_on = None

    def __init__(self, model: Any) -> None:
        self.model = model
        self.started: list[tuple[ReplyRequest, str]] = []

    def start(self, request: ReplyRequest, **_kwargs: Any) -> Generation:
        self.started.append((request, threading.current_thread().name))
        generation = Generation("recorded", lambda g: None)
        generation.end("done", MessageStatus.COMPLETE, {}, None)
        return generation


def test_the_request_reaches_the_backend_as_built_with_its_messages_read_on_the_turns_thread(cove_core):
    model = cove_core.library.get("tiny-llama")
    conversation = cove_core.history.create_conversation(model=model.name)
    record = TurnRecord.begin(cove_core.history, conversation.id, "hi", model=model, params=SamplingParams())
    writer = ListWriter(record.assistant)
    read_on: list[str] = []

    def messages() -> list[dict]:
        read_on.append(threading.current_thread().name)
        return [{"role": "user", "content": "hi"}]

    asked = ReplyRequest(sampling=SamplingParams(max_tokens=7).sampling(), conversation_id=conversation.id, priority="window")
    turn = Turn(writer, asked, messages=messages)
    assert read_on == []  # nothing is read on the thread that builds the turn
    backend = _Recording(model)
    turn.launch(backend)  # type: ignore[arg-type]
    events = _poll_until(turn, lambda seen: any(isinstance(e, EndEvent) for e in seen))
    assert events[-1].status == MessageStatus.COMPLETE
    ((request, thread),) = backend.started
    assert read_on == [thread] == ["cove-turn"]
    assert request == asked.but(messages=[{"role": "user", "content": "hi"}])  # the rest as the front end built it
    assert writer.sent == [{"role": "user", "content": "hi"}]
