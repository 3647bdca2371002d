"""`cove serve --host ADDR` off loopback speaks HTTPS with this machine's certificate (real TLS,
a real `cove serve` process on 127.0.0.2, the official openai client trusting that certificate
alone), refuses plain HTTP on that port, serves plain HTTP there only with --insecure-http, and
refuses to start when it cannot have a certificate."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
from cryptography import x509

from app.serve.http.tls import fingerprint, machine_certificate
from tests.support.paths import REPO_ROOT
from tests.support.processes import stop_process
from tests.support.serve_fixture import CLI, free_port
from tests.support.tiny_model import write_tiny_gguf

HOST = "127.0.0.2"


@dataclass(frozen=True)
class Home:
    root: Path
    env: dict[str, str]
    key: str

    @property
    def cert_file(self) -> Path:
        return self.root / "cove" / "data" / "tls" / "cert.pem"

    def cove(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], cwd=REPO_ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)


def _home(root: Path, *, model: bool) -> Home:
    env = {**os.environ, "COVE_HOME": str(root / "cove"), "HOME": str(root)}
    if model:
        tiny = write_tiny_gguf(root / "tiny.gguf")
        subprocess.run([*CLI, "models", "import", str(tiny)], cwd=REPO_ROOT, env=env, check=True, capture_output=True, timeout=120)
    added = subprocess.run([*CLI, "serve", "keys", "add", "laptop"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert added.returncode == 0, added.stderr
    return Home(root, env, added.stdout.strip())


@dataclass(frozen=True)
class Running:
    url: str  # SCHEME://127.0.0.2:PORT, without /v1
    port: int
    log: Path

    def banner(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return _home(tmp_path_factory.mktemp("tls-home"), model=True)


def _serving(home: Home, scheme: str, *args: str) -> Iterator[Running]:
    port = free_port()
    log = home.root / f"serve-{port}.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([*CLI, "serve", "--host", HOST, "--port", str(port), *args], cwd=REPO_ROOT, env=home.env, stderr=stderr)
    running = Running(f"{scheme}://{HOST}:{port}", port, log)
    deadline = time.monotonic() + 60
    try:
        while f"{scheme}://{HOST}:{port}/v1" not in running.banner():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"cove serve did not start: {running.banner()[-2000:]}")
            time.sleep(0.2)
        yield running
    finally:
        stop_process(proc, 30)


@pytest.fixture(scope="module")
def https(home: Home) -> Iterator[Running]:
    yield from _serving(home, "https")


def _trusting(cert_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert_file))


def _client(home: Home, server: Running, cert_file: Path) -> openai.OpenAI:
    http = httpx.Client(verify=_trusting(cert_file), timeout=60)
    # openai types http_client as httpx2's; it takes httpx's as well (its is_legacy_httpx_sync_client).
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=home.key, http_client=http, max_retries=0)  # type: ignore[arg-type]


def test_the_banner_gives_the_https_address_and_the_certificates_fingerprint(home: Home, https: Running) -> None:
    served = x509.load_pem_x509_certificate(home.cert_file.read_bytes())
    shown = re.search(r"fingerprint: ([0-9A-F:]{95})", https.banner())
    assert shown is not None and shown.group(1) == fingerprint(served), https.banner()
    assert f"cove serve: https://{HOST}:{https.port}/v1" in https.banner()
    assert "Made this machine's certificate" in https.banner() and str(home.cert_file) in https.banner()
    assert "Traceback" not in https.banner()


def test_the_openai_client_trusting_the_certificate_lists_models_and_chats(home: Home, https: Running) -> None:
    client = _client(home, https, home.cert_file)
    assert [m.id for m in client.models.list()] == ["auto", "tiny"]
    reply = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4, seed=1)
    assert reply.choices[0].message.content is not None and reply.usage is not None and reply.usage.completion_tokens >= 1
    stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True)
    assert sum(1 for _ in stream) >= 1
    # The key is still asked for over TLS.
    keyless = openai.OpenAI(
        base_url=f"{https.url}/v1",
        api_key="wrong",
        http_client=httpx.Client(verify=_trusting(home.cert_file)),  # type: ignore[arg-type]  # httpx's, taken as httpx2's
        max_retries=0,
    )
    with pytest.raises(openai.AuthenticationError):
        keyless.models.list()


def test_plain_http_to_the_https_port_gets_no_answer(home: Home, https: Running) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{HOST}:{https.port}/v1/models", headers={"Authorization": f"Bearer {home.key}"}, timeout=10)
    # The server is none the worse for it.
    assert httpx.get(f"{https.url}/v1/models", headers={"Authorization": f"Bearer {home.key}"}, verify=_trusting(home.cert_file)).is_success


def test_a_client_trusting_another_certificate_is_refused_by_the_handshake(home: Home, https: Running, tmp_path: Path) -> None:
    other = machine_certificate(tmp_path / "elsewhere", HOST)  # same names, another key: what a machine in the middle would show
    with pytest.raises(openai.APIConnectionError) as refused:
        _client(home, https, other.cert_file).models.list()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value.__cause__) or "certificate verify failed" in str(refused.value.__cause__)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https.url}/v1/models", verify=True)  # the system's CAs do not know it either


def test_insecure_http_serves_plain_http_and_says_so(home: Home, https: Running) -> None:
    for server in _serving(home, "http", "--insecure-http"):
        answered = httpx.get(f"{server.url}/v1/models", headers={"Authorization": f"Bearer {home.key}"}, timeout=30)
        assert answered.is_success and [m["id"] for m in answered.json()["data"]] == ["auto", "tiny"]
        assert "plain HTTP on 127.0.0.2 (--insecure-http)" in server.banner() and "fingerprint" not in server.banner()


def test_without_a_certificate_it_refuses_to_start_with_a_sentence(tmp_path: Path) -> None:
    home = _home(tmp_path, model=False)
    home.cert_file.parent.parent.mkdir(parents=True, exist_ok=True)
    home.cert_file.parent.write_text("a file where the certificate's folder goes")
    refused = home.cove("serve", "--host", HOST, "--port", str(free_port()))
    assert refused.returncode == 1, refused.stderr
    assert f"cannot serve HTTPS on {HOST}" in refused.stderr and "--insecure-http" in refused.stderr
    assert "Traceback" not in refused.stderr and "Ctrl-C stops" not in refused.stderr
