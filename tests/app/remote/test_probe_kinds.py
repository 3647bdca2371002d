"""The probe's reading of each server's own answers, for the servers that cannot run here
(vLLM, Ollama, llama-server's listing): small stand-ins answer with the shapes those servers
document, on 127.0.0.1. (llama-cpp-python, llama-server and Cove are probed for real elsewhere.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.responses import PlainTextResponse

from app.remote.errors import RemoteProblem
from app.remote.probe import probe
from models.network import NetworkGate
from tests.app.remote.conftest import connection_to, stand_in

VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "meta-llama/Llama-3.1-70B-Instruct",
            "object": "model",
            "created": 1730000000,
            "owned_by": "vllm",
            "root": "/models/Llama-3.1-70B-Instruct",
            "parent": None,
            "max_model_len": 32768,
            "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": True}],
        }
    ],
}
OLLAMA_MODELS = {
    "object": "list",
    "data": [
        {"id": "llama3.2:3b", "object": "model", "created": 1730000000, "owned_by": "library"},
        {"id": "qwen2.5:7b", "object": "model", "created": 1730000000, "owned_by": "library"},
    ],
}
OLLAMA_TAGS = {
    "models": [
        {
            "name": "llama3.2:3b",
            "model": "llama3.2:3b",
            "size": 2019393189,
            "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
            "details": {"format": "gguf"},
        },
        {"name": "qwen2.5:7b", "model": "qwen2.5:7b", "digest": "845dbda0ea48ed749caafd9e6037047aa19acfcfd82e704d7ca97d631a0b697e"},
    ]
}
LLAMA_SERVER_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "gemma-3-270m-it-Q4_K_M.gguf",
            "object": "model",
            "created": 1730000000,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 1, "n_vocab": 262144, "n_ctx_train": 32768, "n_embd": 640},
        }
    ],
}
LLAMA_SERVER_PROPS = {
    "default_generation_settings": {"n_ctx": 8192, "params": {}},
    "total_slots": 1,
    "model_path": "/models/gemma-3-270m-it-Q4_K_M.gguf",
    "build_info": "b6000-abc1234",
}


@pytest.fixture
def vllm() -> Iterator[str]:
    yield from stand_in({"/v1/models": VLLM_MODELS, "/version": {"version": "0.6.3.post1"}})


@pytest.fixture
def ollama() -> Iterator[str]:
    yield from stand_in({"/v1/models": OLLAMA_MODELS, "/api/version": {"version": "0.5.7"}, "/api/tags": OLLAMA_TAGS})


@pytest.fixture
def llama_server_like() -> Iterator[str]:
    yield from stand_in({"/v1/models": LLAMA_SERVER_MODELS, "/props": LLAMA_SERVER_PROPS})


@pytest.fixture
def other() -> Iterator[str]:
    yield from stand_in({"/api/v1/models": {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "org"}]}})


def test_vllm_by_its_owner_and_root(vllm: str, gate: NetworkGate) -> None:
    info = probe(connection_to(vllm), None, gate)
    assert (info.kind, info.version) == ("vllm", "0.6.3.post1")
    assert info.models == [
        {"id": "meta-llama/Llama-3.1-70B-Instruct", "fingerprint": None, "context_length": 32768, "root": "/models/Llama-3.1-70B-Instruct"}
    ]


def test_ollama_by_its_version_with_each_model_s_digest(ollama: str, gate: NetworkGate) -> None:
    info = probe(connection_to(ollama + "/v1"), None, gate)
    assert (info.kind, info.version) == ("ollama", "0.5.7")
    assert [(m["id"], m["fingerprint"]) for m in info.models] == [
        ("llama3.2:3b", OLLAMA_TAGS["models"][0]["digest"]),
        ("qwen2.5:7b", OLLAMA_TAGS["models"][1]["digest"]),
    ]


def test_llama_server_by_its_props(llama_server_like: str, gate: NetworkGate) -> None:
    info = probe(connection_to(llama_server_like), None, gate)
    assert (info.kind, info.version) == ("llama-server", "b6000-abc1234")
    assert info.models == [{"id": "gemma-3-270m-it-Q4_K_M.gguf", "fingerprint": None, "context_length": 8192}]


def test_anything_else_that_lists_models_is_openai_compatible(other: str, gate: NetworkGate) -> None:
    info = probe(connection_to(other + "/api/v1"), None, gate)
    assert (info.kind, info.version, [m["id"] for m in info.models]) == ("openai-compatible", None, ["m"])
    with pytest.raises(RemoteProblem) as wrong_root:  # the API root left out of the address
        probe(connection_to(other), None, gate)
    assert wrong_root.value.kind == "not_found" and "ends in the API root" in str(wrong_root.value)


def test_a_server_that_is_not_an_api_is_a_sentence(gate: NetworkGate) -> None:
    for url in stand_in({"/v1/models": PlainTextResponse("<html>router login</html>")}):
        with pytest.raises(RemoteProblem) as refused:
            probe(connection_to(url), None, gate)
        assert refused.value.kind == "protocol" and "did not answer like an OpenAI-compatible server" in str(refused.value)
