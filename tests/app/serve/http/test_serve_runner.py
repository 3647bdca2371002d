"""The server on a thread of the window's process: it answers on its port with its own
database connection, says in a sentence when the port is taken, and stops cleanly."""

from __future__ import annotations

import socket

import httpx

from app.serve.http.runner import ServerThread
from app.store.request_log import RequestLog
from tests.support.serve_fixture import requests_of


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_thread_answers_and_stops(cove_core) -> None:
    server = ServerThread(cove_core.paths, port=_free_port())
    assert server.start() is None, server.error
    try:
        assert server.running
        models = httpx.get(f"{server.address}/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["auto", "tiny-llama"]
        reply = httpx.post(
            f"{server.address}/chat/completions",
            timeout=60,
            json={"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0},
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        assert [e.model for e in server.loaded()] == ["tiny-llama"] and server.loaded()[0].slots >= 1  # one engine
    finally:
        server.stop()
    assert not server.running
    # The window's own connection sees what the server's thread wrote.
    entries = RequestLog(cove_core.db).entries()
    assert [(e["client"], e["endpoint"]) for e in entries] == [("local API", "/v1/chat/completions")] * 2
    assert [e["status"] for e in requests_of(entries)] == ["length"]  # opened, then closed


def test_a_taken_port_is_a_sentence(cove_core) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServerThread(cove_core.paths, port=port)
        error = server.start()
    assert error is not None and "in use" in error and str(port) in error
    assert not server.running


def test_stopping_mid_reply_ends_it_as_cancelled_and_keeps_its_record(cove_core, tmp_path) -> None:
    import threading

    from tests.support.tiny_model import write_tiny_gguf

    # Greedy, the tiny model never ends a turn by itself: 6,000 tokens in an 8,192 context outlast the stop.
    cove_core.library.import_file(write_tiny_gguf(tmp_path / "long.gguf", n_ctx_train=8192), name="long")
    server = ServerThread(cove_core.paths, port=_free_port())
    assert server.start() is None, server.error
    got: list[str] = []

    def stream() -> None:
        body = {"model": "long", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 6000, "stream": True, "temperature": 0}
        try:
            with httpx.stream("POST", f"{server.address}/chat/completions", json=body, timeout=60) as response:
                got.extend(response.iter_lines())
        except httpx.HTTPError as exc:
            got.append(f"error: {exc}")

    reader = threading.Thread(target=stream)
    reader.start()
    for _ in range(600):
        if any(row.tokens > 3 for row in server.live()):
            break
        threading.Event().wait(0.05)
    server.stop()
    reader.join(60)
    assert not reader.is_alive() and "data: [DONE]" in got  # the client was told the reply ended
    (entry,) = requests_of(RequestLog(cove_core.db).entries())
    assert entry["status"] == "cancelled" and entry["reply"]


def test_requests_run_on_the_engines_as_the_pool_loaded_them(cove_core) -> None:
    """Requests at once run on the one engine the pool loaded (its slots), never loading it again:
    one asking for other load settings than the pool's would reload it under the others."""
    import threading

    server = ServerThread(cove_core.paths, port=_free_port(), parallel=2)
    assert server.start() is None, server.error
    try:

        def ask(i: int) -> None:
            httpx.post(
                f"{server.address}/chat/completions",
                timeout=60,
                json={"model": "tiny-llama", "messages": [{"role": "user", "content": f"hi {i}"}], "max_tokens": 40},
            )

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.pool is not None
        engines = server.pool.engines
        assert len(engines) == 1 and engines[0].client.loaded is engines[0].loaded  # one process, loaded once
        assert [(e.model, e.slots) for e in server.loaded()] == [("tiny-llama", engines[0].slots)]
    finally:
        server.stop()
