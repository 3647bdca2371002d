"""A real `cove serve` subprocess on a free loopback port, in a home of its own with the tiny
model imported, and the `cove` command line run against that home (its keys, its record)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.paths import Paths
from app.serve.http.runner import ServerThread
from tests.support.paths import REPO_ROOT
from tests.support.processes import stop_process
from tests.support.tiny_model import write_tiny_gguf

CLI = [sys.executable, "-m", "app.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT, without /v1
    home: Path
    env: dict[str, str]
    process: subprocess.Popen | None = None

    def cove(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], cwd=REPO_ROOT, env=self.env, capture_output=True, text=True, timeout=120)

    def record(self) -> list[dict]:
        """The written record's entries, oldest first."""
        done = self.cove("record", "export", "--format", "jsonl")
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    def requests(self) -> list[dict]:
        """The record as requests (requests_of)."""
        return requests_of(self.record())


def requests_of(entries: list[dict]) -> list[dict]:
    """The record's requests, oldest first: each opening entry with what its closing entry says
    (reply, status, usage, timings, error; "closing": the entry itself, None while open). The
    erasures and entries of other kinds are left out."""
    closing = {}
    for entry in entries:
        closes = json.loads(entry["params"] or "{}").get("closes") if entry["status"] != "open" else None
        if closes is not None:
            closing[closes] = entry
    out = []
    for entry in entries:
        if entry["status"] != "open":
            continue
        close = closing.get(entry["seq"])
        merged = {**entry, "closing": close}
        if close is not None:
            merged.update({name: close[name] for name in ("reply", "status", "usage", "timings", "model_sha256")})
            merged["error"] = json.loads(close["params"]).get("error")
        out.append(merged)
    return out


@contextmanager
def cove_serve(home: Path, *, n_ctx_train: int = 512, args: tuple[str, ...] = (), new_session: bool = False) -> Iterator[Served]:
    """The server answering at Served.url until the block ends. `n_ctx_train`: the tiny model's
    training context, which is the context Cove gives it (up to 8,192); `args`: more of `cove
    serve`'s options; `new_session`: the server leads a process group of its own (for signals
    sent to the group, os.killpg)."""
    env = {**os.environ, "COVE_HOME": str(home / "cove"), "HOME": str(home)}
    model = write_tiny_gguf(home / "tiny.gguf", n_ctx_train=n_ctx_train)
    subprocess.run([*CLI, "models", "import", str(model)], cwd=REPO_ROOT, env=env, check=True, capture_output=True, timeout=120)
    port = free_port()
    log = home / "serve.log"  # a file, not a pipe no one reads, which a talkative server could fill
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [*CLI, "serve", "--port", str(port), *args], cwd=REPO_ROOT, env=env, stderr=stderr, start_new_session=new_session
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/v1/models", timeout=2).raise_for_status()
            break
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"cove serve did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
    try:
        yield Served(url, home, env, proc)
    finally:
        if proc.poll() is None:
            stop_process(proc, 30)


@contextmanager
def server_thread(paths: Paths) -> Iterator[ServerThread]:
    """The window's API server (app/serve/http/runner.py ServerThread) on a free port of this machine,
    stopped once the replies it still streams have ended."""
    thread = ServerThread(paths, port=free_port())
    assert thread.start() is None, thread.error
    try:
        yield thread
    finally:
        for _ in range(200):
            if not thread.live():
                break
            time.sleep(0.05)
        thread.stop()
