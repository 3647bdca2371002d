"""Chatting never opens a network connection: every Python process of a chat is audited.

A `sitecustomize` on PYTHONPATH installs an audit hook (PEP 578) in the `cove` process and in
every child it starts (the engine host inherits the environment), and logs each
`socket.connect` / `socket.getaddrinfo` with its address family. llama.cpp is built without
its download support, so the Python level is where a connection could come from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

SITECUSTOMIZE = """
import json, os, socket, sys
_LOG = os.environ["COVE_TEST_NET_LOG"]
def _hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
        family = None
        if event != "socket.getaddrinfo":
            family = getattr(args[0], "family", None)
            family = getattr(family, "name", str(family))
        with open(_LOG, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "event": event, "family": family, "args": repr(args[1:])[:200]}) + "\\n")
sys.addaudithook(_hook)
with open(_LOG, "a") as fh:
    fh.write(json.dumps({"pid": os.getpid(), "event": "start", "family": None, "args": " ".join(sys.argv)}) + "\\n")
"""


def _audited_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    hook_dir = tmp_path / "audit"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "net.log"
    log.write_text("")
    env = dict(os.environ)
    env.update(
        COVE_HOME=str(tmp_path / "home"),
        COVE_TEST_NET_LOG=str(log),
        PYTHONPATH=os.pathsep.join([str(hook_dir), str(REPO_ROOT)]),
    )
    return env, log


def _network_events(log: Path) -> list[dict]:
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # A Unix socket stays on the machine, and a netlink socket talks to the kernel itself (cove
    # serve asks it who owns a connecting socket, app/serve/http/peer_owner.py): neither is the network.
    return [e for e in events if e["event"] != "start" and e["family"] not in ("AF_UNIX", "AF_NETLINK")]


def test_the_audit_hook_sees_a_real_connection(tmp_path: Path) -> None:
    # The instrument itself: a process that does connect is caught.
    env, log = _audited_env(tmp_path)
    code = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError:\n    pass\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert any(e["event"] == "socket.connect" and e["family"] == "AF_INET" for e in _network_events(log))


def test_a_chat_opens_no_network_connection(tmp_path: Path, tiny_gguf: Path) -> None:
    env, log = _audited_env(tmp_path)
    cove = [sys.executable, "-m", "app.cli.main"]
    done = subprocess.run(
        [*cove, "chat", "--model", str(tiny_gguf), "--max-tokens", "16", "Hello there"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    follow = subprocess.run(
        [*cove, "chat", "--max-tokens", "8", "And again"],  # continues the chat
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert follow.returncode == 0, follow.stderr
    assert _network_events(log) == []
    # The engine host ran under the hook too (it talks to the CLI over pipes, not sockets).
    starts = [json.loads(line) for line in log.read_text().splitlines() if '"start"' in line]
    assert any("app.engine.host.main" in s["args"] or "--in-fd" in s["args"] for s in starts), starts


@pytest.mark.parametrize("offline", ["1"])
def test_offline_refuses_hub_calls_before_any_socket(tmp_path: Path, offline: str) -> None:
    env, log = _audited_env(tmp_path)
    env["COVE_OFFLINE"] = offline
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "models", "files", "org/repo-GGUF"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and "offline" in done.stderr
    assert _network_events(log) == []


def test_serving_a_streaming_client_opens_no_connection_out(tmp_path: Path, tiny_gguf: Path) -> None:
    import socket
    import time

    import httpx

    env, log = _audited_env(tmp_path)
    cove = [sys.executable, "-m", "app.cli.main"]
    subprocess.run([*cove, "models", "import", str(tiny_gguf)], env=env, check=True, capture_output=True, timeout=120)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([*cove, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/models", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        body = {"model": tiny_gguf.stem, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16, "stream": True}
        with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=120) as response:
            assert response.status_code == 200
            chunks = [line for line in response.iter_lines() if line.startswith("data: ")]
        assert chunks[-1] == "data: [DONE]"
    finally:
        server.terminate()
        server.wait(timeout=60)
    events = _network_events(log)
    # Inbound loopback only: no process of the server connected anywhere or looked a name up.
    assert events == []
    starts = [json.loads(line) for line in log.read_text().splitlines() if '"start"' in line]
    assert any("app.engine.host.main" in s["args"] or "--in-fd" in s["args"] for s in starts), starts


def test_documents_are_read_embedded_searched_and_chatted_with_without_a_connection(tmp_path: Path, tiny_gguf: Path) -> None:
    from tests.support.docs_corpus import write_corpus
    from tests.support.tiny_model import write_tiny_gguf

    env, log = _audited_env(tmp_path)
    cove = [sys.executable, "-m", "app.cli.main"]
    corpus = write_corpus(tmp_path / "papers")
    embedder = write_tiny_gguf(tmp_path / "tiny-embed.gguf", pooling_type=1)
    steps = [
        ["models", "import", str(embedder)],
        ["docs", "add", "papers", str(corpus.root)],
        ["docs", "search", "papers", "lighthouse gulls"],
        ["chat", "--model", str(tiny_gguf), "--docs", "papers", "--max-tokens", "8", "How many gulls?"],
    ]
    for step in steps:
        done = subprocess.run([*cove, *step], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (step, done.stderr)
    status = subprocess.run([*cove, "docs", "status", "papers", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)["vectors"] > 0  # the embedding model's own engine host ran too
    assert _network_events(log) == []
