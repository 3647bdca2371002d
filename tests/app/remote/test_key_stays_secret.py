"""A whole session with a keyed server (add the connection with its key, probe, chat, a refused
key, a server that echoes the key back): afterwards the key is in no file under COVE_HOME and
in no sentence Cove produced."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import open_core
from app.engine.request import ReplyRequest, Sampling
from app.paths import resolve_paths
from app.remote.engine import RemoteEngine
from app.remote.errors import RemoteProblem
from app.remote.probe import probe
from app.remote.remote_model import remote_models
from app.statuses import MessageStatus
from tests.app.remote.conftest import SERVER_KEY
from tests.support.fault_proxy import FaultProxy
from tests.support.keyrings import files_containing
from tests.support.llama_cpp_server import LlamaCppServer


def test_the_key_is_in_no_file_and_no_sentence_after_a_session(tmp_path: Path, keyed_server: LlamaCppServer) -> None:
    home = tmp_path / "home"
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    sentences: list[str] = []
    try:
        connections = core.connections
        connections.add("box", keyed_server.url, key=SERVER_KEY)
        sentences.append(connections.last_notice or "")  # no secure keyring in tests: kept in memory, and said so
        assert "kept in memory for this run only" in sentences[0]
        key = connections.key("box")
        assert key == SERVER_KEY
        connection = connections.record_probe("box", probe(connections.get("box"), key, core.network))
        model = remote_models(connection)[0]

        conversation = core.history.create_conversation(model=model.name)
        user = core.history.add_user_message(conversation.id, "hello")
        row = core.history.start_assistant_message(
            conversation.id, parent_id=user.id, model_name=model.name, model_sha256=model.fingerprint, model_quant=None, params={}
        )
        engine = RemoteEngine(connection, key, core.network)
        final = engine.generate(
            ReplyRequest.chat([{"role": "user", "content": "hello"}], sampling=Sampling(max_tokens=8)), model=model
        ).wait(30)
        engine.close()
        assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE)
        core.history.finish_assistant(row.id, final.text, status=final.status, metrics=final.metrics)

        with pytest.raises(RemoteProblem) as problem:
            probe(connection, "sk-not-the-key", core.network)
        sentences.append(str(problem.value))
        wrong = RemoteEngine(connection, "sk-not-the-key", core.network)
        refused = wrong.generate(
            ReplyRequest.chat([{"role": "user", "content": "hello"}], sampling=Sampling(max_tokens=8)), model=model
        ).wait(30)
        wrong.close()
        row = core.history.start_assistant_message(
            conversation.id, parent_id=user.id, model_name=model.name, model_sha256=None, model_quant=None, params={}
        )
        core.history.finish_assistant(row.id, refused.text, status=refused.status, metrics=refused.metrics, error=refused.error)
        sentences.append(refused.error or "")

        with FaultProxy(keyed_server.url) as proxy:  # a server whose error message repeats the key
            proxy.mode, proxy.status, proxy.message = "status", 401, f"Incorrect API key provided: {SERVER_KEY}"
            echoed = connections.add("echo", proxy.url, key=SERVER_KEY)
            engine = RemoteEngine(echoed, connections.key("echo"), core.network)
            sentences.append(
                engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model)
                .wait(30)
                .error
                or ""
            )
            sentences.append(repr(engine) + repr(engine.http) + repr(connections.keys))
            engine.close()
    finally:
        core.close()
    assert all(sentences) and "[key]" in sentences[3]
    assert not any(SERVER_KEY in s for s in sentences)
    assert files_containing(home, SERVER_KEY) == []
    assert any(home.rglob("*.db"))  # the history was written there
