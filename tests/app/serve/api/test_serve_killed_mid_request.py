"""`cove serve` killed with kill -9 while one request streams and another waits for the engine:
at the next start, both are in the history (the client's messages, the reply as far as it was
checkpointed) and in the record (opened, then closed as interrupted), and the record verifies."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx

from tests.support.serve_fixture import cove_serve

CHUNKS = 51  # as the reproduction: killed after 51 chunks


def _stream_until_killed(url: str, got: list[str], started: threading.Event) -> None:
    # A text completion: no turn format, so no stop string; greedy, the tiny model never ends by itself.
    body = {"model": "tiny", "prompt": "tell me everything", "max_tokens": 6000, "temperature": 0, "stream": True}
    try:
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    got.append(json.loads(line[6:])["choices"][0].get("text") or "")
                    started.set()
    except httpx.HTTPError:
        pass


def _waiting(url: str) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "I wait my turn"}], "max_tokens": 8}
    try:
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    except httpx.HTTPError:
        pass


def test_requests_in_flight_at_kill_9_are_in_the_history_and_the_record_after_the_next_start(tmp_path) -> None:
    got: list[str] = []
    started = threading.Event()
    with cove_serve(tmp_path, n_ctx_train=8192, args=("--parallel", "1")) as served:
        streaming = threading.Thread(target=_stream_until_killed, args=(served.url, got, started))
        streaming.start()
        assert started.wait(120)
        waiting = threading.Thread(target=_waiting, args=(served.url,))
        waiting.start()
        deadline = time.monotonic() + 60
        while len(got) < CHUNKS and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)  # a checkpoint is due at most every 0.75 s
        assert served.process is not None and served.process.poll() is None, "the reply ended before the kill"
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(30)
        streaming.join(60)
        waiting.join(60)
        streamed = "".join(got)

        # The next start (any cove command) closes what was open.
        listed = served.cove("history", "list")
        assert listed.returncode == 0, listed.stderr
        entries = served.record()
        verified = served.cove("record", "verify")
        shown = {c: served.cove("history", "show", c, "--json") for c in {e["conversation_id"] for e in entries if e["conversation_id"]}}

    opened = [e for e in entries if e["status"] == "open"]
    assert [json.loads(e["messages"])[-1]["content"] for e in opened] == ["tell me everything", "I wait my turn"]
    closing = {json.loads(e["params"])["closes"]: e for e in entries if e["status"] != "open"}
    assert set(closing) == {e["seq"] for e in opened}
    long_close, wait_close = closing[opened[0]["seq"]], closing[opened[1]["seq"]]
    assert long_close["status"] == wait_close["status"] == "interrupted"
    # The checkpointed text: some of what the client got (a checkpoint is at most 0.75 s old), none invented.
    assert long_close["reply"] and streamed.startswith(long_close["reply"])
    assert wait_close["reply"] == ""
    assert verified.returncode == 0, verified.stdout + verified.stderr

    conversations = {}
    for cid, done in shown.items():
        assert done.returncode == 0, done.stderr
        conversations[cid] = json.loads(done.stdout)
    long_messages = conversations[opened[0]["conversation_id"]]["messages"]
    assert [(m["role"], m["status"]) for m in long_messages] == [("user", "complete"), ("assistant", "interrupted")]
    assert long_messages[0]["content"] == "tell me everything" and long_messages[1]["content"] == long_close["reply"]
    wait_messages = conversations[opened[1]["conversation_id"]]["messages"]
    assert [(m["role"], m["content"], m["status"]) for m in wait_messages] == [
        ("user", "I wait my turn", "complete"),
        ("assistant", "", "interrupted"),
    ]
