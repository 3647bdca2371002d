"""POST /v1/embeddings with the official openai client: an embedding model (the tiny model
written with a pooling type) gives one unit vector per text, as base64 or floats; a chat model
is a clear 400; each request is in the written record."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.serve.http.runner import ServerThread
from app.store.request_log import RequestLog
from tests.support.serve_fixture import requests_of
from tests.support.tiny_model import write_tiny_gguf


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(cove_core, tmp_path: Path) -> Iterator[str]:
    cove_core.library.import_file(write_tiny_gguf(tmp_path / "embedder.gguf", pooling_type=1), name="embedder")
    thread = ServerThread(cove_core.paths, port=_free_port())
    assert thread.start() is None, thread.error
    yield thread.address
    thread.stop()


def _client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)


def test_an_embedding_model_gives_one_unit_vector_per_text(server: str, cove_core) -> None:
    result = _client(server).embeddings.create(model="embedder", input=["a lighthouse", "a glacier", "a lighthouse"])
    vectors = [d.embedding for d in result.data]  # the client asked for base64 and decoded it
    assert [d.index for d in result.data] == [0, 1, 2] and len({len(v) for v in vectors}) == 1 and len(vectors[0]) > 1
    for vector in vectors:
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-4)
    assert vectors[0] == pytest.approx(vectors[2], abs=1e-6) and vectors[0] != pytest.approx(vectors[1], abs=1e-3)
    assert result.usage.prompt_tokens > 0 and result.model == "embedder"
    floats = httpx.post(
        f"{server}/embeddings", timeout=60, json={"model": "embedder", "input": "a glacier", "encoding_format": "float"}
    ).json()
    assert floats["data"][0]["embedding"] == pytest.approx(vectors[1], abs=1e-5)
    (first, second) = [e for e in requests_of(RequestLog(cove_core.db).entries()) if e["endpoint"] == "/v1/embeddings"]
    assert first["client"] == "local API" and "a glacier" in first["messages"] and first["status"] == "complete"


def test_a_chat_model_or_bad_input_is_a_bad_request(server: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(server).embeddings.create(model="tiny-llama", input="hello")
    assert "not an embedding model" in caught.value.message and caught.value.body["param"] == "model"
    for body, param in (
        ({"model": "embedder", "input": []}, "input"),
        ({"model": "embedder", "input": [1, 2]}, "input"),
        ({"model": "embedder", "input": "x", "dimensions": 8}, "dimensions"),
    ):
        reply = httpx.post(f"{server}/embeddings", json=body, timeout=60)
        assert reply.status_code == 400 and reply.json()["error"]["param"] == param
    with pytest.raises(openai.NotFoundError):
        _client(server).embeddings.create(model="nothing-here", input="hello")
    assert _client(server).embeddings.create(model="embedder", input="still here").data  # the server goes on
