"""What `cove serve` writes, and when it cannot: a request that cannot fit is refused before
anything is written; while another program holds the history's write lock, other clients are
answered, the reply is delivered, and it is written once the lock is let go."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import httpx

from tests.support.serve_fixture import cove_serve, requests_of


def _conversations(database) -> int:
    with sqlite3.connect(database) as db:
        return db.execute("SELECT count(*) FROM conversations").fetchone()[0]


def test_a_request_that_cannot_fit_is_refused_before_anything_is_written(tmp_path) -> None:
    with cove_serve(tmp_path) as served:
        database = served.home / "cove" / "data" / "cove.db"
        many = {"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}] * 100_000}
        refused = httpx.post(f"{served.url}/v1/chat/completions", json=many, timeout=120)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded" and "100,000 messages" in error["message"]
        long = {"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "a" * 3_000_000}]}
        too_long = httpx.post(f"{served.url}/v1/chat/completions", json=long, timeout=120)
        assert too_long.status_code == 400 and "characters" in too_long.json()["error"]["message"]
        assert served.record() == [] and _conversations(database) == 0
        # A request that fits is answered as ever.
        ok = httpx.post(
            f"{served.url}/v1/chat/completions",
            timeout=60,
            json={"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert ok.status_code == 200, ok.text


def _stream(url: str, body: dict, lines: list[str]) -> None:
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=120) as response:
        lines.extend(line for line in response.iter_lines() if line.startswith("data: "))


def test_a_reply_is_delivered_while_the_history_is_locked_and_saved_when_the_lock_is_let_go(tmp_path) -> None:
    with cove_serve(tmp_path) as served:
        database = served.home / "cove" / "data" / "cove.db"
        body = {"model": "tiny", "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": "saved later"}]}
        streamed_body = {**body, "messages": [{"role": "user", "content": "streamed, saved later"}]}
        holder = sqlite3.connect(database, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another program writing, for longer than the busy timeout
        answered: list[httpx.Response] = []
        lines: list[str] = []
        chat = threading.Thread(target=lambda: answered.append(httpx.post(f"{served.url}/v1/chat/completions", json=body, timeout=120)))
        stream = threading.Thread(target=_stream, args=(served.url, streamed_body, lines))
        try:
            chat.start()
            time.sleep(0.5)  # the request is now waiting for the lock
            # Another client is answered while the history is still locked (the lock is let go
            # below). The chat's own entry waits for the lock on the store's thread meanwhile; its
            # reply, made while it waited, is delivered as soon as that write gives up.
            models = httpx.get(f"{served.url}/v1/models", timeout=60)
            assert models.status_code == 200
            stream.start()
            chat.join(120)
            stream.join(120)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        (reply,) = answered
        assert reply.status_code == 200, reply.text
        text = reply.json()["choices"][0]["message"]["content"]
        assert "not in Cove's history yet" in reply.json()["warning"]
        # The stream gave the whole reply, then said what could not be saved, then [DONE].
        chunks = [json.loads(line[6:]) for line in lines[:-1]]
        assert lines[-1] == "data: [DONE]" and chunks[-1]["error"]["code"] == "history_not_saved"
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
        assert chunks[-2]["choices"][0]["finish_reason"] is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(requests_of(served.record())) < 2:
            time.sleep(0.5)  # retried every few seconds
        first, second = requests_of(served.record())
        assert json.loads(first["messages"]) == body["messages"] and first["reply"] == text
        assert json.loads(second["messages"]) == streamed_body["messages"] and second["reply"] == streamed
        assert first["status"] == second["status"] == "length"
        assert _conversations(database) == 2
        verified = served.cove("record", "verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
