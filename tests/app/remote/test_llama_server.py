"""Cove against llama.cpp's own `llama-server`, a real server no one here wrote, built once from
the pinned llama.cpp sources (tests/support/llama_server.py) and serving the tiny model on
127.0.0.1: the probe knows it and lists its model; a reply streams as TokenEvents and ends with
Cove's clocks and the server's `timings`; Stop closes the stream, the reply ends cancelled with
its text, and the server stops generating."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.engine.generation import FinishedEvent, TokenEvent
from app.engine.request import ReplyRequest, Sampling
from app.remote.connections import Connection
from app.remote.engine import RemoteEngine
from app.remote.probe import probe
from app.remote.remote_model import RemoteModel
from models.network import NetworkGate
from tests.support.llama_server import LlamaServer, llama_server, llama_server_binary
from tests.support.tiny_model import write_tiny_gguf

CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# llama-server comes from llama.cpp's tools, which the suite builds once before the first test
# marked slow_build (tests/support/llama_tools_build.py); the timeout counts the tests themselves,
# not the fixture that starts the server.
pytestmark = [pytest.mark.slow_build, pytest.mark.timeout(300, func_only=True)]

N_CTX = 4096  # room for a long greedy reply, so Stop lands while it streams
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 1, "min_p": 0.0, "repeat_penalty": 1.0, "seed": 7}
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me about the sea."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    folder = tmp_path_factory.mktemp("llama-server")
    model = write_tiny_gguf(
        folder / "tiny-chatml.gguf", chat_template=CHATML, n_ctx_train=N_CTX, extra_tokens=("<|im_start|>", "<|im_end|>")
    )
    llama_server_binary()  # built once before the first test (tests/support/llama_tools_build.py)
    with llama_server(model, folder, alias="tiny", n_ctx=N_CTX, extra_args=["--metrics"]) as running:
        yield running


@pytest.fixture
def gate() -> NetworkGate:
    return NetworkGate()


def _connection(server: LlamaServer) -> Connection:
    return Connection(name="workstation", base_url=server.base_url, ca_file=None, host=f"127.0.0.1:{server.port}")


def _model(server: LlamaServer) -> RemoteModel:
    return RemoteModel(connection="workstation", model_id=server.model_id, host=f"127.0.0.1:{server.port}", kind="llama-server")


def _tokens_predicted(server: LlamaServer) -> float:
    """llama-server's own count of the tokens it has generated (its Prometheus /metrics)."""
    for line in httpx.get(f"{server.url}/metrics", timeout=5).text.splitlines():
        if line.startswith("llamacpp:tokens_predicted_total "):
            return float(line.split()[-1])
    raise AssertionError("llama-server's /metrics has no tokens_predicted_total")


def test_probe_knows_llama_server_by_its_props_and_lists_the_model(server: LlamaServer, gate: NetworkGate) -> None:
    info = probe(_connection(server), None, gate)
    assert info.kind == "llama-server"
    props = httpx.get(f"{server.url}/props", timeout=10).json()
    assert info.version == props["build_info"]  # the build it reports of itself
    assert [m["id"] for m in info.models] == ["tiny"]
    assert info.models[0]["context_length"] == N_CTX
    assert info.private is True


def test_a_reply_streams_as_token_events_and_carries_the_servers_timings(server: LlamaServer, gate: NetworkGate) -> None:
    engine = RemoteEngine(_connection(server), None, gate)
    gen = engine.generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=24, **GREEDY)), model=_model(server))
    events = list(gen)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    finished = events[-1]
    assert isinstance(finished, FinishedEvent) and all(isinstance(e, TokenEvent) for e in events[:-1])
    assert len(tokens) >= 2
    assert [t.t for t in tokens] == sorted(t.t for t in tokens)  # arrival clock, in order
    assert finished.status == "length" and finished.text == "".join(t.text for t in tokens) != ""
    m = finished.metrics
    timings = m["remote"]["server_timings"]
    # llama-server's own figures for this reply: what it generated and how fast
    assert timings["predicted_n"] == 24 and timings["predicted_per_second"] > 0
    assert timings["prompt_n"] > 0 and timings["prompt_ms"] > 0
    # Cove's own clocks beside them
    assert m["gen_tokens"] == 24 and m["gen_tps"] > 0 and m["ttft_ms"] > 0
    assert m["remote"]["kind"] == "llama-server" and m["remote"]["model_id"] == "tiny"
    assert m["remote"]["connection"] == "workstation" and m["remote"]["host"] == f"127.0.0.1:{server.port}"
    assert m["remote"]["server_usage"]["completion_tokens"] == 24


def test_the_same_greedy_request_gives_the_same_text_twice(server: LlamaServer, gate: NetworkGate) -> None:
    engine = RemoteEngine(_connection(server), None, gate)
    texts = [
        engine.generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=12, **GREEDY)), model=_model(server)).wait(60).text
        for _ in range(2)
    ]
    assert texts[0] == texts[1] != ""  # the conversation and settings reached the server as sent


def test_stop_mid_reply_ends_it_cancelled_with_the_text_and_frees_the_server(server: LlamaServer, gate: NetworkGate) -> None:
    engine = RemoteEngine(_connection(server), None, gate)
    before = _tokens_predicted(server)
    gen = engine.generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=N_CTX - 64, **GREEDY)), model=_model(server))
    seen: list[str] = []
    for event in gen:
        if isinstance(event, TokenEvent):
            seen.append(event.text)
            if len(seen) == 3:
                gen.cancel()
        else:
            finished = event
    assert finished.status == "cancelled"
    assert finished.text == "".join(seen) and len(seen) >= 3
    assert finished.metrics.get("gen_tokens", 0) < N_CTX - 64
    # The closed stream reached llama-server: once its one slot is idle, it has generated a few
    # tokens more than Cove took, not the thousands the request allowed.
    while any(slot.get("is_processing") for slot in httpx.get(f"{server.url}/slots", timeout=5).json()):
        time.sleep(0.05)
    assert _tokens_predicted(server) - before < 1000
    after = engine.generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=4, **GREEDY)), model=_model(server)).wait(60)
    assert after.status == "length"


def test_the_key_is_required_and_sent_only_as_a_bearer(tmp_path: Path, gate: NetworkGate) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", chat_template=CHATML, extra_tokens=("<|im_start|>", "<|im_end|>"))
    with llama_server(model, tmp_path, alias="tiny", api_key="sk-test-0123456789") as keyed:
        conn = _connection(keyed)
        assert probe(conn, "sk-test-0123456789", gate).kind == "llama-server"
        reply = (
            RemoteEngine(conn, "sk-test-0123456789", gate)
            .generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=4, **GREEDY)), model=_model(keyed))
            .wait(60)
        )
        assert reply.status == "length"
        wrong = (
            RemoteEngine(conn, "sk-wrong", gate)
            .generate(ReplyRequest.chat(MESSAGES, sampling=Sampling(max_tokens=4, **GREEDY)), model=_model(keyed))
            .wait(60)
        )
        assert wrong.status == "error" and "sk-wrong" not in (wrong.error or "")
        assert "key" in (wrong.error or "").lower()
