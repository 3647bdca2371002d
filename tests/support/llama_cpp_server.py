"""llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`, from its
`server` extra) on a free loopback port, serving the tiny model the suite writes: a real
server no one here wrote, for the remote-connection tests; and the same server as one of the
person's own servers (`running_server`, with its key) for the chat and `cove remote` tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.processes import stop_process
from tests.support.serve_fixture import free_port
from tests.support.tiny_model import write_tiny_gguf

MODEL_ALIAS = "tiny"


@dataclass(frozen=True)
class LlamaCppServer:
    url: str  # http(s)://127.0.0.1:PORT, without /v1
    port: int
    model: str  # the model's id in GET /v1/models
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def llama_cpp_server(
    folder: Path, *, api_key: str | None = None, certfile: Path | None = None, keyfile: Path | None = None, n_ctx: int = 512
) -> Iterator[LlamaCppServer]:
    """The server answering until the block ends. `api_key`: every request then needs it;
    `certfile`/`keyfile`: serve https with that certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "tiny.gguf"
    if not model.exists():
        write_tiny_gguf(model)
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        "--verbose",
        "False",
    ]
    if api_key is not None:
        args += ["--api_key", api_key]
    scheme = "http"
    if certfile is not None and keyfile is not None:
        args += ["--ssl_certfile", str(certfile), "--ssl_keyfile", str(keyfile)]
        scheme = "https"
    log = folder / f"llama_cpp_server.{port}.log"
    with log.open("wb") as out:  # a file, not a pipe no one reads
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"{scheme}://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            # Any answer means it listens (with a key or TLS the answer may be 401 or unverified).
            httpx.get(f"{url}/v1/models", timeout=2, verify=False)
            break
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"llama_cpp.server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
    try:
        yield LlamaCppServer(url, port, MODEL_ALIAS, log)
    finally:
        stop_process(proc, 15)


# The key of the person's own server in the chat and `cove remote` tests; it must never reach a
# file, an argv or an output.
REMOTE_KEY = "sk-cove-remote-canary-3f9a1c"


@dataclass(frozen=True)
class RemoteServer:
    """The server as a remote connection sees it."""

    base_url: str  # http://127.0.0.1:PORT/v1
    host: str  # 127.0.0.1:PORT
    port: int
    model_id: str
    key: str | None


@contextmanager
def running_server(folder: Path, *, key: str | None = REMOTE_KEY) -> Iterator[RemoteServer]:
    """The server with room for long replies (a context of 2048), asking for `key`."""
    with llama_cpp_server(folder, api_key=key, n_ctx=2048) as running:
        yield RemoteServer(f"{running.url}/v1", f"127.0.0.1:{running.port}", running.port, running.model, key)
