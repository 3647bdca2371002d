"""`cove serve` runs its replies through the one turn the window and `cove chat` use: the reply is
started by app/turn's LocalBackend, its status comes from app/turn/status.py's one mapping (a
server that stops, a client that leaves), and the Turn's writer is what the record and the
history get. Each test would fail if the API drove the engine or mapped statuses on its own."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import pytest

from app.engine.request import ReplyRequest
from app.serve.http.runner import ServerThread
from app.store.request_log import RequestLog
from app.turn import turn as turn_module
from app.turn.local_backend import LocalBackend
from app.turn.status import StopCause, end_status
from tests.support.serve_fixture import requests_of
from tests.support.tiny_model import write_tiny_gguf


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What went through app/turn: each LocalBackend.start, and each end_status (reported, cause)."""
    out: dict[str, list[Any]] = {"starts": [], "ends": [], "tools": []}
    real_start = LocalBackend.start

    def start(self: LocalBackend, request: ReplyRequest, **kwargs: Any) -> Any:
        out["starts"].append((self.model.name, request.keep_all_turns, request.raw_prompt))
        offer = request.tools
        out["tools"].append(None if offer is None else (offer.choice, offer.name, [t["function"]["name"] for t in offer.tools]))
        return real_start(self, request, **kwargs)

    def mapped(reported: str, cause: StopCause | None) -> str:
        out["ends"].append((reported, cause))
        return end_status(reported, cause)

    monkeypatch.setattr(LocalBackend, "start", start)
    monkeypatch.setattr(turn_module, "end_status", mapped)
    return out


def _wait_idle(server: ServerThread) -> None:
    for _ in range(400):
        if not server.live():
            return
        time.sleep(0.05)
    raise AssertionError(f"requests still live: {server.live()}")


def test_a_reply_is_started_by_the_backend_and_ended_by_the_turn(cove_core, seen) -> None:
    server = ServerThread(cove_core.paths, port=_free_port())
    assert server.start() is None, server.error
    try:
        chat = httpx.post(
            f"{server.address}/chat/completions",
            timeout=60,
            json={"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0},
        )
        text = httpx.post(
            f"{server.address}/completions", timeout=60, json={"model": "tiny-llama", "prompt": "Once", "max_tokens": 2, "temperature": 0}
        )
        tool = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
        called = httpx.post(
            f"{server.address}/chat/completions",
            timeout=60,
            json={
                "model": "tiny-llama",
                "messages": [{"role": "user", "content": "time?"}],
                "max_tokens": 2,
                "temperature": 0,
                "tools": [tool],
                "tool_choice": {"type": "function", "function": {"name": "get_time"}},
            },
        )
        assert chat.status_code == text.status_code == called.status_code == 200, (chat.text, text.text, called.text)
        _wait_idle(server)
    finally:
        server.stop()
    # All went through the backend, with what the request asked of the engine (every turn kept, a raw
    # prompt, its tools).
    assert seen["starts"] == [("tiny-llama", True, None), ("tiny-llama", True, "Once"), ("tiny-llama", True, None)]
    assert seen["tools"] == [None, None, ("required", "get_time", ["get_time"])]
    assert seen["ends"] == [("length", None)] * 3
    entries = requests_of(RequestLog(cove_core.db).entries())
    assert [(e["endpoint"], e["status"]) for e in entries] == [
        ("/v1/chat/completions", "length"),
        ("/v1/completions", "length"),
        ("/v1/chat/completions", "length"),
    ]
    assert entries[0]["reply"] == chat.json()["choices"][0]["message"]["content"]


def test_a_stopped_server_and_a_client_that_left_end_through_the_one_mapping(cove_core, tmp_path, seen) -> None:
    # Greedy, the tiny model never ends a turn by itself: 6,000 tokens in an 8,192 context outlast the stop.
    cove_core.library.import_file(write_tiny_gguf(tmp_path / "long.gguf", n_ctx_train=8192), name="long")
    server = ServerThread(cove_core.paths, port=_free_port())
    assert server.start() is None, server.error
    body = {"model": "long", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 6000, "stream": True, "temperature": 0}
    got: list[str] = []

    def stream() -> None:
        try:
            with httpx.stream("POST", f"{server.address}/chat/completions", json=body, timeout=60) as response:
                got.extend(response.iter_lines())
        except httpx.HTTPError as exc:
            got.append(f"error: {exc}")

    def wait_for_tokens() -> None:
        for _ in range(600):
            if any(row.tokens > 3 for row in server.live()):
                return
            time.sleep(0.05)
        raise AssertionError("the reply never streamed")

    try:
        # A client that leaves mid-stream: the turn is stopped as the person's Stop is ('cancelled').
        with httpx.stream("POST", f"{server.address}/chat/completions", json=body, timeout=60) as response:
            wait_for_tokens()
            next(response.iter_lines())
        _wait_idle(server)
        left = list(seen["ends"])
        # The server stopping mid-reply: its own cause, and the same mapping.
        reader = threading.Thread(target=stream)
        reader.start()
        wait_for_tokens()
    finally:
        server.stop()
    reader.join(60)
    assert not reader.is_alive() and "data: [DONE]" in got
    assert left == [("cancelled", StopCause.PERSON)]
    assert seen["ends"][1:] == [("cancelled", StopCause.SERVER)]
    gone, stopped = requests_of(RequestLog(cove_core.db).entries())
    assert gone["status"] == stopped["status"] == "cancelled" and stopped["reply"]
