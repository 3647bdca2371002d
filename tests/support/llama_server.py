"""llama.cpp's own `llama-server`, built once from the pinned sources with llama.cpp's other tools
into the persistent tools cache (the one `cove bench` uses when COVE_HOME is not set, e.g.
~/.cache/cove/tools; the suite builds them before its first test, tests/support/llama_tools_build.py),
and run on 127.0.0.1 with a given GGUF until a block ends.

The cache is resolved without COVE_HOME on purpose: tests point COVE_HOME at temporary
folders, and a build there would be thrown away and redone on every run.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.paths import resolve_paths
from app.speed.llama_tools import ensure_tool, library_env
from tests.support.processes import stop_process
from tests.support.serve_fixture import free_port


def tools_cache() -> Path:
    """The persistent tools cache: Cove's own, resolved as if COVE_HOME were not set."""
    return resolve_paths({k: v for k, v in os.environ.items() if k != "COVE_HOME"}).tools_dir


def llama_server_binary(log: Callable[[str], None] | None = None) -> Path:
    """The built llama-server (building the tools the first time takes minutes; see docs/decisions/benchmarks.md)."""
    return ensure_tool(tools_cache(), "llama-server", log=log or (lambda _msg: None))


@dataclass(frozen=True)
class LlamaServer:
    url: str  # http://127.0.0.1:PORT, without /v1
    port: int
    model_id: str  # what /v1/models lists (the --alias given)
    log: Path  # the server's own output
    pid: int = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


@contextmanager
def llama_server(
    model: Path,
    log_dir: Path,
    *,
    alias: str = "tiny",
    n_ctx: int = 512,
    threads: int = 1,
    api_key: str | None = None,
    extra_args: Sequence[str] = (),
    binary: Path | None = None,
    start_timeout_s: float = 120.0,
    slots: int = 1,
) -> Iterator[LlamaServer]:
    """llama-server serving `model` on a free loopback port, answering /health, until the block ends.

    One slot (-np 1) by default, so the whole context belongs to the one request a test sends
    (`n_ctx` is the whole context, shared by `slots`); the key, when given, goes through the
    environment (LLAMA_API_KEY), not the command line.
    """
    exe = binary or llama_server_binary()
    port = free_port()
    cmd = [
        str(exe),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--alias",
        alias,
        "-c",
        str(n_ctx),
        "-t",
        str(threads),
        "-np",
        str(slots),
        "--no-webui",
        *plain_weights(),
        *extra_args,
    ]
    env = library_env(exe)
    if api_key is not None:
        env["LLAMA_API_KEY"] = api_key
    log = log_dir / f"llama-server-{port}.log"
    with log.open("wb") as out:  # a file, not a pipe: nobody reads the server's chatter as it comes
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, url, log, start_timeout_s)
        yield LlamaServer(url, port, alias, log, proc.pid)
    finally:
        stop_process(proc, 30)


def plain_weights() -> list[str]:
    """llama-server's --no-repack where Cove's engine keeps the weights out of llama.cpp's extra
    buffers (app/engine/host/cpu_quirks.py: their AMX path stops the process with SIGILL here), so
    both run the same kernels."""
    from app.engine.host.cpu_quirks import extra_buffers

    return [] if extra_buffers()[0] else ["--no-repack"]


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout_s: float) -> None:
    """Until /health says 200 (it answers 503 while the model loads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"llama-server did not answer /health in {timeout_s:.0f} s: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
