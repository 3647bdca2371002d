"""Two Coves on this machine, each with a home of its own, for the pairing tests: a `cove serve
--host 127.0.0.2` (HTTPS with its machine's certificate) run as a subprocess in one home, and the
`cove` command line run in another. A home's keyring is a file (tests.support.keyrings)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.paths import resolve_paths
from tests.support.paths import REPO_ROOT
from tests.support.processes import stop_process
from tests.support.serve_fixture import CLI, free_port
from tests.support.tiny_model import write_tiny_gguf

HOST = "127.0.0.2"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("COVE_OFFLINE", "API_KEY")}
        env.update(
            COVE_HOME=str(self.root / "cove"),
            HOME=str(self.root),
            PYTHONPATH=str(REPO_ROOT),
            PYTHON_KEYRING_BACKEND="tests.support.keyrings.FileKeyring",
            COVE_TEST_KEYRING_FILE=str(self.root / "keyring.json"),
        )
        return env

    @property
    def paths(self):  # noqa: ANN201 - app.paths.Paths
        return resolve_paths({"COVE_HOME": str(self.root / "cove")})

    def cove(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], cwd=REPO_ROOT, env=self.env, input=stdin, capture_output=True, text=True, timeout=120)


@dataclass(frozen=True)
class Server:
    home: Home
    port: int
    log: Path
    pid: int = 0  # the `cove serve` process

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def code(self) -> str:
        made = self.home.cove("serve", "pair", "--host", HOST, "--port", str(self.port))
        assert made.returncode == 0, made.stderr
        assert f"cove remote pair NAME https://{HOST}:{self.port} " in made.stderr and "Traceback" not in made.stderr
        return made.stdout.strip()


def serving(home: Home, port: int | None = None) -> Iterator[Server]:
    """`cove serve --host HOST` on `port` (a free one by default) in `home`, once it answers; stopped after."""
    port = port or free_port()
    log = home.root / f"serve-{port}.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([*CLI, "serve", "--host", HOST, "--port", str(port)], cwd=REPO_ROOT, env=home.env, stderr=stderr)
    deadline = time.monotonic() + 60
    try:
        while f"https://{HOST}:{port}/v1" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"cove serve did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield Server(home, port, log, proc.pid)
    finally:
        stop_process(proc, 30)


def desk_home(root: Path) -> Home:
    """A home with the tiny model imported and one API key (off loopback `cove serve` starts only once a key exists)."""
    home = Home(root)
    tiny = write_tiny_gguf(home.root / "tiny.gguf")
    assert home.cove("models", "import", str(tiny)).returncode == 0
    added = home.cove("serve", "keys", "add", "editor")
    assert added.returncode == 0, added.stderr
    return home


def der_of(pem_file: Path) -> bytes:
    """The DER bytes of the PEM certificate in `pem_file`."""
    return x509.load_pem_x509_certificate(pem_file.read_bytes()).public_bytes(serialization.Encoding.DER)
