"""A server that sends text no file or terminal can hold: a lone UTF-16 surrogate written as a
JSON escape ("\\ud800") in a streamed chunk, in its error message, or in a whole JSON reply.
Each such character becomes U+FFFD, the reply goes on and is kept whole, and the person is
told once, in a sentence; `cove chat` prints it and records the reply."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from starlette.responses import Response

from app.remote.sse import storable
from app.statuses import MessageStatus
from models.network import NetworkGate
from tests.app.remote.conftest import stand_in
from tests.app.remote.test_stream_shapes import ask, chunk, served, sse
from tests.support.paths import REPO_ROOT

LONE = "\ud800"


def test_storable_replaces_lone_surrogates_only() -> None:
    assert storable("Hello " + LONE + "good" + "\udfff") == ("Hello \ufffdgood\ufffd", 2)
    assert storable("fine 😀 text") == ("fine 😀 text", 0)


def test_a_lone_surrogate_in_a_chunk_is_replaced_and_the_reply_kept(gate: NetworkGate) -> None:
    answer = sse(chunk("Hello "), chunk(LONE), chunk("good part. "), chunk(LONE + LONE), chunk(finish="stop"), "[DONE]")
    for url in served(answer):
        final = ask(url, gate)
    assert final.status == MessageStatus.COMPLETE
    assert final.text == "Hello \ufffdgood part. \ufffd\ufffd"
    assert final.metrics["remote"]["replaced_characters"] == 3
    note = final.metrics["text_note"]
    assert "3 characters" in note and "U+FFFD" in note
    final.text.encode("utf-8")  # what is kept can be stored and printed


def test_a_lone_surrogate_in_reasoning_usage_or_an_error_is_replaced(gate: NetworkGate) -> None:
    answer = sse(
        chunk(reasoning_content="hm" + LONE),
        chunk("ok "),
        {"choices": [], "usage": {"prompt_tokens": 3, "note" + LONE: LONE}},
        {"error": {"message": "bad " + LONE + " thing"}},
    )
    for url in served(answer):
        final = ask(url, gate)
    assert final.status == MessageStatus.INTERRUPTED
    assert final.text == "<think>\nhm\ufffd\n</think>\n\nok "
    assert "bad \ufffd thing" in (final.error or "")
    json.dumps(final.metrics, ensure_ascii=False).encode("utf-8")  # the figures can be stored too


def test_a_whole_json_reply_with_a_lone_surrogate_is_replaced(gate: NetworkGate) -> None:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi " + LONE}, "finish_reason": "stop"}]}
    whole = Response(json.dumps(body).encode(), media_type="application/json")  # the escape, as a server writes it
    for url in served(whole):
        final = ask(url, gate)
    assert final.status == MessageStatus.COMPLETE and final.text == "Hi \ufffd"
    assert final.metrics["remote"]["replaced_characters"] == 1


def test_cove_chat_prints_and_records_the_reply_and_says_so_once(tmp_path: Path) -> None:
    answer = sse(chunk("Hello "), chunk(LONE), chunk("good part. "), chunk(LONE), chunk(finish="stop"), "[DONE]")
    env = {k: v for k, v in os.environ.items() if k not in ("COVE_OFFLINE", "API_KEY")}
    env.update(COVE_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO_ROOT), PYTHONIOENCODING="utf-8")

    def cove(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", *args], cwd=REPO_ROOT, env=env, input="", capture_output=True, timeout=180
        )

    for url in stand_in({"/v1/chat/completions": answer, "/v1/models": {"object": "list", "data": [{"id": "tiny"}]}}):
        added = cove("remote", "add", "box", f"{url}/v1", "--no-key")
        assert added.returncode == 0, added.stderr
        done = cove("chat", "--model", "tiny@box", "--new", "hi")
    out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 0, err
    assert "codec" not in err and "Traceback" not in err
    assert "Hello \ufffdgood part. \ufffd" in out
    assert err.count("U+FFFD") == 1, err
    con = sqlite3.connect(tmp_path / "home" / "data" / "cove.db")
    try:
        status, content = con.execute("SELECT status, content FROM messages WHERE role = 'assistant'").fetchone()
    finally:
        con.close()
    assert status == MessageStatus.COMPLETE and content == "Hello \ufffdgood part. \ufffd"
