"""What clients call beyond the main endpoints, against a real `cove serve`: every unknown route
and method answers in the API's JSON error shape (Anthropic's under /v1/messages), a model by its
id, the Anthropic token count, llama-server's routes without /v1, a body nested past the parser's
depth as a 400; and the command line's serve errors: a taken port exits 1 with a sentence, an
IPv6 host is bracketed in the banner, a non-number --ttl is refused."""

from __future__ import annotations

import socket
import subprocess

import httpx
import pytest

from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import CLI, cove_serve, free_port

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with cove_serve(tmp_path_factory.mktemp("routes")) as s:
        yield s


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/v1/nope"), ("GET", "/nope"), ("POST", "/v1/chat"), ("GET", "/"), ("GET", "/v1/chat/completions")]
)
def test_unknown_routes_and_methods_answer_in_openai_shape(served, method, path) -> None:
    response = httpx.request(method, served.url + path, timeout=10, headers=JSON, content=b"{}" if method == "POST" else None)
    assert response.status_code in (404, 405)
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and path in error["message"]


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/messages"), ("POST", "/v1/messages/batches")])
def test_unknown_routes_under_messages_answer_in_anthropic_shape(served, method, path) -> None:
    response = httpx.request(method, served.url + path, timeout=10, headers=JSON, content=b"{}" if method == "POST" else None)
    assert response.status_code in (404, 405)
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] in ("not_found_error", "invalid_request_error")
    assert path in body["error"]["message"]


def test_a_model_by_its_id(served) -> None:
    for prefix in ("/v1", ""):
        entry = httpx.get(f"{served.url}{prefix}/models/tiny", timeout=10).json()
        cove = entry.pop("cove")
        assert entry == {"id": "tiny", "object": "model", "created": 0, "owned_by": "cove"}
        # Cove's own object: what another of the person's Coves reads to place a conversation.
        assert len(cove["sha256"]) == 64 and cove["vision"] is False
        assert set(cove) == {"sha256", "context_length", "vision", "loaded", "loading", "slots", "free_slots"}
    missing = httpx.get(f"{served.url}/v1/models/no-such-model", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_a_reply_names_its_machine_and_model_file_and_the_listing_shows_it_loaded(served) -> None:
    sha = httpx.get(f"{served.url}/v1/models/tiny", timeout=10).json()["cove"]["sha256"]
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
    whole = httpx.post(f"{served.url}/v1/chat/completions", timeout=60, json=body)
    assert whole.status_code == 200
    assert whole.headers["cove-model-sha256"] == sha and whole.headers["cove-machine"]
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", timeout=60, json={**body, "stream": True}) as streamed:
        assert streamed.headers["cove-model-sha256"] == sha
        streamed.read()
    listing = httpx.get(f"{served.url}/v1/models", timeout=10).json()
    assert listing["cove"]["machine"] == whole.headers["cove-machine"] and listing["cove"]["waiting"] == 0
    auto, entry = listing["data"]
    assert auto["id"] == "auto"  # first, then the model
    # The engine stays loaded after the reply (the idle TTL is minutes), its slots all free again.
    assert entry["cove"]["loaded"] is True and entry["cove"]["free_slots"] == entry["cove"]["slots"] >= 1


def test_routes_without_v1_as_llama_server_answers_them(served) -> None:
    assert [m["id"] for m in httpx.get(f"{served.url}/models", timeout=10).json()["data"]] == ["auto", "tiny"]
    chat = httpx.post(
        f"{served.url}/chat/completions",
        timeout=60,
        json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0},
    )
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion"
    text = httpx.post(f"{served.url}/completions", timeout=60, json={"model": "tiny", "prompt": "a", "max_tokens": 2})
    assert text.status_code == 200 and text.json()["object"] == "text_completion"
    vectors = httpx.post(f"{served.url}/embeddings", timeout=60, json={"model": "tiny", "input": "a"})
    assert vectors.status_code in (200, 400) and ("data" in vectors.json() or "error" in vectors.json())


def test_count_tokens_counts_with_the_models_tokenizer(served) -> None:
    def count(messages: list[dict], **extra: object) -> int:
        response = httpx.post(f"{served.url}/v1/messages/count_tokens", timeout=60, json={"model": "tiny", "messages": messages, **extra})
        assert response.status_code == 200, response.text
        return response.json()["input_tokens"]

    short = count([{"role": "user", "content": "hi"}])
    longer = count([{"role": "user", "content": "hi " * 40}])
    brief = count([{"role": "user", "content": "hi"}], system="be brief")
    wordy = count([{"role": "user", "content": "hi"}], system="be brief " * 20)
    assert 0 < short < longer and 0 < brief < wordy
    # The prompt a reply reads has that many tokens.
    reply = httpx.post(
        f"{served.url}/v1/messages", timeout=60, json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    ).json()
    assert reply["usage"]["input_tokens"] + reply["usage"]["cache_read_input_tokens"] == short
    bad = httpx.post(f"{served.url}/v1/messages/count_tokens", timeout=10, json={"model": "tiny"})
    assert bad.status_code == 400 and bad.json()["type"] == "error"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_json_nested_100000_deep_is_a_400_in_the_apis_shape(served, path) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    response = httpx.post(served.url + path, content=body, headers=JSON, timeout=30)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "nested too deeply" in message
    assert "Traceback" not in (served.home / "serve.log").read_text(errors="replace")


def _serve(home_env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "serve", *args], cwd=REPO_ROOT, env=home_env, capture_output=True, text=True, timeout=60)


def test_a_taken_port_exits_1_with_a_sentence(served) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    done = _serve(served.env, "--port", str(port))
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr and "Traceback" not in done.stderr


def test_ttl_not_a_number_is_refused(served) -> None:
    for value in ("nan", "inf"):
        done = _serve(served.env, "--ttl", value)
        assert done.returncode == 2 and f"'{value}' is not a number of minutes" in done.stderr


def test_an_ipv6_host_is_bracketed_in_the_banner(served) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.fail("this machine has no IPv6 loopback to test with")
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "serve", "--host", "::1", "--port", str(port)], cwd=REPO_ROOT, env=served.env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"http://[::1]:{port}/v1" in line
        assert httpx.get(f"http://[::1]:{port}/v1/models", timeout=20).status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)
