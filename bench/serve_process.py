"""`cove serve` for a benchmark: a subprocess on a free loopback port of `env`'s home, answering
before the block starts and stopped after it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serving(env: dict[str, str], *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """(the API's base URL, the server process) while the block runs; `args` go to cove serve."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port), *args], cwd=ROOT, env=env, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            try:
                httpx.get(f"{base}/models", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base, server
    finally:
        server.terminate()
        server.wait(timeout=60)
