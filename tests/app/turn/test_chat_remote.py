"""A turn on one of the person's own servers (app/turn/service.py with app/remote/), against llama-cpp-python's
own OpenAI-compatible server on 127.0.0.1 serving the tiny model: the same TurnRecord as a local
turn (the person's message first, the reply streamed, checkpointed and finished with its figures),
recorded with where it ran; a cancel keeps the partial reply; a stream cut mid-reply is kept as
interrupted with the reason; an unreachable server is a sentence and the message stays."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from app.engine.request import ReplyRequest
from app.remote.remote_model import RemoteModel, remote_models
from app.settings import SamplingParams
from app.store.request_log import RequestLog
from app.turn.backend import backend_for
from app.turn.record import TurnRecord
from app.turn.service import ChatService
from tests.support.fault_proxy import FaultProxy
from tests.support.keyrings import InMemoryKeyring, use_keyring
from tests.support.llama_cpp_server import RemoteServer, running_server
from tests.support.serve_fixture import free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteServer]:
    with running_server(tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.fixture
def keyring_in_memory() -> Iterator[InMemoryKeyring]:
    with use_keyring(InMemoryKeyring()) as backend:
        yield backend  # type: ignore[misc]


def _connect(core, server: RemoteServer, name: str = "box") -> RemoteModel:
    from app.remote.probe import probe

    connection = core.connections.add(name, server.base_url, key=server.key)
    connection = core.connections.record_probe(name, probe(connection, core.connections.key(name), core.network))
    (model,) = remote_models(connection)
    return model


GREEDY = SamplingParams(temperature=0.0, max_tokens=12, seed=1)


def test_a_remote_turn_is_kept_and_recorded_like_a_local_one(cove_core, server, keyring_in_memory) -> None:
    model = _connect(cove_core, server)
    assert model.name == f"{server.model_id}@box" and model.host == server.host and model.kind == "llama-cpp-python"
    conversation = cove_core.history.create_conversation()
    pieces: list[str] = []
    service = ChatService(cove_core.history, None, remote_engine=cove_core.remote_engine, checkpoint_interval_s=0.0)
    result = service.send(conversation.id, "hello there", model=model, params=GREEDY, system_prompt="Be brief.", on_text=pieces.append)
    assert result.status in {"complete", "length"}, result.error
    assert result.text and "".join(pieces) == result.text and len(pieces) >= 2  # streamed, not one lump

    user, reply = cove_core.history.messages(conversation.id)
    assert user.content == "hello there" and reply.content == result.text
    assert reply.model_name == f"{server.model_id}@box" and reply.model_quant is None
    assert reply.params["temperature"] == 0.0 and reply.params["max_tokens"] == 12
    assert reply.metrics["gen_tokens"] >= 2 and reply.metrics["ttft_ms"] > 0 and reply.metrics["turn_ms"] > 0
    assert reply.metrics["remote"]["host"] == server.host and reply.metrics["remote"]["connection"] == "box"
    assert cove_core.history.get_conversation(conversation.id).model == model.name  # reopening picks it again

    (entry,) = RequestLog(cove_core.db).entries()
    assert entry["client"] == "command line" and entry["model_name"] == model.name and entry["reply"] == result.text
    assert json.loads(entry["ran_on"]) == {
        "connection": "box",
        "host": server.host,
        "kind": "llama-cpp-python",
        "model_id": server.model_id,
        "fingerprint": None,
    }
    assert [m["role"] for m in json.loads(entry["messages"])] == ["system", "user"]
    assert json.loads(entry["usage"])["completion_tokens"] == reply.metrics["gen_tokens"]
    assert RequestLog(cove_core.db).verify().intact

    # The next turn sends the conversation so far: the server keeps no state of its own.
    second = service.send(conversation.id, "and again", model=model, params=GREEDY, system_prompt="Be brief.")
    assert second.status in {"complete", "length"}, second.error
    sent = json.loads(RequestLog(cove_core.db).entries()[1]["messages"])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"] and sent[2]["content"] == result.text


def test_a_window_turn_starts_without_a_file_check_or_a_load(cove_core, server, keyring_in_memory) -> None:
    """The window's path: TurnRecord on the database's thread, the model's backend started on another."""
    model = _connect(cove_core, server)
    conversation = cove_core.history.create_conversation()
    turn = TurnRecord.begin(cove_core.history, conversation.id, "hello", model=model, params=GREEDY, checkpoint_interval_s=0.0)
    assert cove_core.history.get_message(turn.user.id).content == "hello"  # the person's words first
    assert cove_core.history.get_message(turn.assistant.id).status == "streaming"
    remote = cove_core.remote_engine(model)
    out: dict[str, object] = {}

    def start() -> None:  # as ui/chat/turn_worker.py runs it: no engine client at all
        asked = ReplyRequest.chat([{"role": "user", "content": "hello"}], sampling=GREEDY.sampling(), conversation_id=conversation.id)
        out["generation"] = backend_for(model, engine=None, remote_engine=remote).start(asked)

    worker = threading.Thread(target=start)
    worker.start()
    worker.join(30)
    generation = out["generation"]
    for event in generation:  # type: ignore[attr-defined]
        if hasattr(event, "status"):
            final = turn.finish(event.status, dict(event.metrics), event.error, text=event.text)
            break
        turn.append(event.text)
    assert final.status in {"complete", "length"} and final.content
    assert json.loads(RequestLog(cove_core.db).entries()[0]["ran_on"])["host"] == server.host


def test_a_cancelled_remote_reply_keeps_its_text(cove_core, server, keyring_in_memory) -> None:
    # The server sends a few pieces and then holds the stream open: only the cancel can end it.
    with FaultProxy(server.base_url.removesuffix("/v1"), mode="stall", after_events=6) as proxy:
        cove_core.connections.add("slow", f"{proxy.url}/v1", key=server.key)
        model = RemoteModel(
            connection="slow", model_id=server.model_id, host=cove_core.connections.get("slow").host, kind="llama-cpp-python"
        )
        conversation = cove_core.history.create_conversation()
        pieces: list[str] = []

        def on_text(text: str) -> None:
            pieces.append(text)
            raise KeyboardInterrupt  # Ctrl-C while a piece is printed, as in cove chat

        service = ChatService(cove_core.history, None, remote_engine=cove_core.remote_engine)
        result = service.send(
            conversation.id, "hello there", model=model, params=SamplingParams(temperature=0.0, max_tokens=100), on_text=on_text
        )
    assert result.interrupted_by_user and result.status == "cancelled"
    saved = cove_core.history.get_message(result.assistant_message.id)
    assert saved.status == "cancelled" and saved.content and saved.content.startswith("".join(pieces))
    assert 1 <= saved.metrics["gen_tokens"] < 100 and saved.metrics["stop_reason"] == "cancelled"
    (entry,) = RequestLog(cove_core.db).entries()
    assert entry["status"] == "cancelled" and entry["reply"] == saved.content and RequestLog(cove_core.db).verify().intact


def test_an_unreachable_server_is_a_sentence_and_the_message_stays(cove_core, keyring_in_memory) -> None:
    cove_core.connections.add("gone", f"http://127.0.0.1:{free_port()}/v1")
    model = RemoteModel(connection="gone", model_id="tiny", host=cove_core.connections.get("gone").host, kind=None)
    conversation = cove_core.history.create_conversation()
    result = ChatService(cove_core.history, None, remote_engine=cove_core.remote_engine).send(
        conversation.id, "are you there?", model=model, params=GREEDY
    )
    assert result.status == "error" and result.error and "\n" not in result.error
    assert model.host in result.error
    user, reply = cove_core.history.messages(conversation.id)
    assert user.content == "are you there?" and reply.status == "error" and reply.error == result.error
    assert reply.metrics["remote"]["host"] == model.host  # marked "on HOST" like any remote reply
    (entry,) = RequestLog(cove_core.db).entries()
    assert entry["status"] == "error" and json.loads(entry["ran_on"])["connection"] == "gone"


def test_offline_refuses_a_remote_turn_with_the_gates_sentence(cove_core, server, keyring_in_memory) -> None:
    model = _connect(cove_core, server)
    cove_core.network.set_offline(True)
    conversation = cove_core.history.create_conversation()
    result = ChatService(cove_core.history, None, remote_engine=cove_core.remote_engine).send(
        conversation.id, "hello", model=model, params=GREEDY
    )
    assert result.status == "error" and "offline" in (result.error or "").lower()
    assert cove_core.history.messages(conversation.id)[0].content == "hello"


def test_a_stream_cut_mid_reply_is_kept_as_interrupted_with_the_reason(cove_core, server, keyring_in_memory) -> None:
    with FaultProxy(server.base_url.removesuffix("/v1"), mode="drop", after_events=6) as proxy:
        cove_core.connections.add("flaky", f"{proxy.url}/v1", key=server.key)
        host = cove_core.connections.get("flaky").host
        model = RemoteModel(connection="flaky", model_id=server.model_id, host=host, kind="llama-cpp-python")
        conversation = cove_core.history.create_conversation()
        pieces: list[str] = []
        result = ChatService(cove_core.history, None, remote_engine=cove_core.remote_engine).send(
            conversation.id, "hello there", model=model, params=SamplingParams(temperature=0.0, max_tokens=60), on_text=pieces.append
        )
    assert len(pieces) >= 2, "some text arrived before the cut"
    assert result.status == "interrupted" and not result.interrupted_by_user
    saved = cove_core.history.get_message(result.assistant_message.id)
    assert saved.status == "interrupted" and saved.content == "".join(pieces)  # nothing that arrived is lost
    assert saved.error and "\n" not in saved.error and host in saved.error  # the reason, one sentence
    assert saved.metrics["remote"]["fault"] == "cut"
    (entry,) = RequestLog(cove_core.db).entries()
    assert entry["status"] == "interrupted" and entry["reply"] == saved.content and RequestLog(cove_core.db).verify().intact


def test_turns_on_one_connection_share_its_engine_until_the_connection_changes(cove_core, keyring_in_memory) -> None:
    cove_core.connections.add("lan", "http://192.168.1.20:8080", key="sk-first")
    model = RemoteModel(connection="lan", model_id="m", host="192.168.1.20:8080", kind="openai-compatible")
    first = cove_core.remote_engine(model)
    assert cove_core.remote_engine(model) is first  # its HTTP connections are reused turn to turn
    cove_core.connections.set_key("lan", "sk-second")
    changed = cove_core.remote_engine(model)
    assert changed is not first and changed.connection.name == "lan"
    assert cove_core.remote_engine(model) is changed
