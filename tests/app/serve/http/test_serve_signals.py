"""Stopping `cove serve` mid-reply with signals sent to its process group, as a service manager,
`timeout` and a terminal's Ctrl-C do: the reply is stopped at once rather than waited for, what
it wrote is kept (recorded as cancelled, its client told), and nothing prints a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import httpx
import pytest

from tests.support.serve_fixture import cove_serve

MAX_TOKENS = 8000  # greedy, the tiny model never ends a turn by itself: far longer than the stop takes


def _stream_until_text(url: str, got: list[str]) -> threading.Thread:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "go on"}], "max_tokens": MAX_TOKENS, "stream": True, "temperature": 0}

    def read() -> None:
        try:
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as response:
                got.extend(response.iter_lines())
        except httpx.HTTPError as exc:
            got.append(f"error: {exc}")

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 60
    while sum(line.startswith("data: ") for line in got) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    return reader


@pytest.mark.parametrize("signals", [(signal.SIGTERM,), (signal.SIGINT, signal.SIGINT)], ids=["sigterm", "two-ctrl-c"])
def test_a_signal_to_the_group_stops_the_reply_at_once_and_keeps_it(tmp_path, signals) -> None:
    with cove_serve(tmp_path, n_ctx_train=8192, new_session=True) as served:
        proc = served.process
        assert proc is not None
        got: list[str] = []
        reader = _stream_until_text(served.url, got)
        for sig in signals:
            os.killpg(proc.pid, sig)
            time.sleep(0.05)
        try:
            code = proc.wait(30)  # generous: it stops in about a second, where it used to wait for the reply
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("cove serve did not stop within 30 s of the signal")
        reader.join(30)
        log = (tmp_path / "serve.log").read_text(errors="replace")
        assert code == 128 + signals[0], log
        assert "Traceback" not in log and "CancelledError" not in log, log
        assert "data: [DONE]" in got  # the client was told the reply ended
        [request] = served.requests()
        assert request["status"] == "cancelled", request
        assert request["reply"]  # what was written is kept
        import json

        assert 0 < json.loads(request["usage"])["completion_tokens"] < MAX_TOKENS
