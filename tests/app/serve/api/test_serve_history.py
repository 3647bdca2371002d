"""API requests in the history: each exchange is a conversation under its client, a client's
next turn of the same chat joins it, it is found by the chats' search and listed by `cove
history`, and deleting it leaves its record entries as marked gaps, not tampering."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from app.cli.main import main as cove_main
from app.serve.http.runner import ServerThread
from app.store.request_log import RequestLog
from app.store.search import search_messages


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(cove_core) -> Iterator[str]:
    thread = ServerThread(cove_core.paths, port=_free_port())
    assert thread.start() is None, thread.error
    yield thread.address
    thread.stop()


def _chat(base: str, messages: list[dict[str, str]]) -> str:
    reply = httpx.post(
        f"{base}/chat/completions",
        timeout=60,
        json={"model": "tiny-llama", "messages": messages, "max_tokens": 5, "temperature": 0, "seed": 3},
    )
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"]


def test_an_api_chat_is_one_conversation_under_its_client(cove_core, server: str) -> None:
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "zebra crossings"}]
    answer = _chat(server, first)
    _chat(server, [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "and giraffes?"}])
    _chat(server, [{"role": "user", "content": "an unrelated question"}])
    api = [c for c in cove_core.history.list_conversations() if c.client == "local API"]
    assert len(api) == 2
    zebra = next(c for c in api if c.title == "zebra crossings")
    assert zebra.system_prompt == "Be brief."
    messages = cove_core.history.messages(zebra.id)
    assert [(m.role, m.content) for m in messages][:3] == [("user", "zebra crossings"), ("assistant", answer), ("user", "and giraffes?")]
    assert len(messages) == 4 and messages[-1].model_name == "tiny-llama" and messages[-1].model_sha256
    assert [h.conversation_id for h in search_messages(cove_core.db, "giraffes")] == [zebra.id]


def test_cove_history_lists_api_conversations_with_their_client(cove_core, server: str, capsys, monkeypatch) -> None:
    _chat(server, [{"role": "user", "content": "listed please"}])
    monkeypatch.setenv("COVE_HOME", str(cove_core.paths.data_dir.parent))
    assert cove_main(["history", "list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "listed please" in ln)
    assert "[local API · API]" in line


def test_deleting_an_api_conversation_leaves_marked_gaps_in_the_record(cove_core, server: str) -> None:
    _chat(server, [{"role": "user", "content": "forget me"}])
    _chat(server, [{"role": "user", "content": "keep me"}])
    log = RequestLog(cove_core.db)
    doomed = next(c for c in cove_core.history.list_conversations() if c.title == "forget me")
    cove_core.history.delete_conversation(doomed.id)
    entries = log.entries()
    erased = [e for e in entries if e["erased"]]
    # The request's opening entry (the messages) and its closing entry (the reply).
    assert [e["status"] for e in erased] == ["open", "length"]
    assert all(e["messages"] is None and e["reply"] is None for e in erased)
    assert any(e["messages"] and "keep me" in e["messages"] for e in entries)
    verdict = log.verify()
    assert verdict.intact and verdict.erased == tuple(e["seq"] for e in erased)
