"""Hub search against the local fake Hub: fields, sort orders, exactly one request (filter=gguf, no
telemetry side call, no token unless given), offline refusal before any connection, error sentences."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from models.hub_errors import HubError
from models.hub_search import HubModel, search_models
from models.network import NetworkGate, NetworkRefused
from tests.support.fake_hub import VALID_TOKEN


@pytest.fixture
def hub(fake_hub):
    fake_hub.add_repo(
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        {"Qwen2.5-7B-Instruct-Q4_K_M.gguf": b"a" * 64},
        downloads=900,
        likes=40,
        last_modified="2025-02-01T10:00:00.000Z",
        license="apache-2.0",
    )
    fake_hub.add_repo(
        "unsloth/Qwen3-8B-GGUF",
        {"Qwen3-8B-Q4_K_M.gguf": b"b" * 64},
        downloads=500,
        likes=300,
        last_modified="2026-01-05T08:30:00.000Z",
        license="apache-2.0",
    )
    fake_hub.add_repo(
        "someone/qwen-gated-GGUF",
        {"m-Q8_0.gguf": b"c" * 64},
        downloads=10,
        likes=5,
        last_modified="2025-06-01T00:00:00.000Z",
        license=None,
        gated=True,
    )
    fake_hub.add_repo("ggml-org/gemma-3-1b-it-GGUF", {"gemma-3-1b-it-Q4_K_M.gguf": b"d" * 64}, downloads=10_000, likes=1)
    return fake_hub


def _query(request) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request.path).query)


def test_results_carry_author_counts_date_licence_and_gated(hub) -> None:
    found = search_models(NetworkGate(), "qwen")
    assert [m.repo_id for m in found] == [
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "unsloth/Qwen3-8B-GGUF",
        "someone/qwen-gated-GGUF",
    ]
    first = found[0]
    assert isinstance(first, HubModel)
    assert first.author == "bartowski"
    assert (first.downloads, first.likes) == (900, 40)
    assert first.last_modified == datetime(2025, 2, 1, 10, 0, tzinfo=UTC)
    assert first.license == "apache-2.0"
    assert first.gated is False
    gated = found[2]
    assert gated.gated is True and gated.license is None and gated.author == "someone"


@pytest.mark.parametrize(
    ("sort", "hub_sort", "expected"),
    [
        ("downloads", "downloads", ["bartowski/Qwen2.5-7B-Instruct-GGUF", "unsloth/Qwen3-8B-GGUF", "someone/qwen-gated-GGUF"]),
        ("likes", "likes", ["unsloth/Qwen3-8B-GGUF", "bartowski/Qwen2.5-7B-Instruct-GGUF", "someone/qwen-gated-GGUF"]),
        ("recent", "lastModified", ["unsloth/Qwen3-8B-GGUF", "someone/qwen-gated-GGUF", "bartowski/Qwen2.5-7B-Instruct-GGUF"]),
    ],
)
def test_sort_orders_and_the_sort_sent_to_the_hub(hub, sort: str, hub_sort: str, expected: list[str]) -> None:
    found = search_models(NetworkGate(), "qwen", sort=sort)
    assert [m.repo_id for m in found] == expected
    assert _query(hub.requests[-1])["sort"] == [hub_sort]


def test_exactly_one_request_filtered_to_gguf_and_no_telemetry(hub) -> None:
    search_models(NetworkGate(), "qwen", limit=7)
    assert len(hub.requests) == 1, [r.path for r in hub.requests]
    request = hub.requests[0]
    assert urlsplit(request.path).path == "/api/models"
    query = _query(request)
    assert query["filter"] == ["gguf"]
    assert query["search"] == ["qwen"]
    assert query["limit"] == ["7"]
    assert "authorization" not in request.headers
    assert not any("agent-harnesses" in r.path for r in hub.requests)
    assert "agent/" not in request.headers.get("user-agent", "")


def test_limit_caps_the_results(hub) -> None:
    found = search_models(NetworkGate(), "", limit=2)
    assert len(found) == 2
    assert found[0].repo_id == "ggml-org/gemma-3-1b-it-GGUF"  # most downloads of all
    assert "search" not in _query(hub.requests[0])  # an empty query searches everything


def test_a_given_token_is_sent_to_the_hub(hub) -> None:
    search_models(NetworkGate(), "qwen", token=VALID_TOKEN)
    assert hub.requests[0].headers.get("authorization") == f"Bearer {VALID_TOKEN}"


@pytest.mark.parametrize("gate", [NetworkGate(offline=True), NetworkGate(environ={"COVE_OFFLINE": "1"})])
def test_offline_refuses_before_any_request(hub, gate: NetworkGate) -> None:
    with pytest.raises(NetworkRefused) as err:
        search_models(gate, "qwen")
    assert "offline" in str(err.value)
    assert hub.requests == []


def test_the_gate_reports_the_call_while_it_runs(hub) -> None:
    gate = NetworkGate()
    seen: list[tuple[str, str, bool]] = []
    gate.add_listener(lambda activity, started: seen.append((activity.kind, activity.host, started)))
    search_models(gate, "qwen")
    host = urlsplit(hub.url).netloc
    assert seen == [("search", host, True), ("search", host, False)]
    assert gate.active() == []


def test_unknown_sort_is_a_sentence(hub) -> None:
    with pytest.raises(HubError) as err:
        search_models(NetworkGate(), "qwen", sort="stars")
    assert "downloads, likes, recent" in str(err.value)
    assert hub.requests == []


def test_unreachable_hub_is_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    import huggingface_hub.utils._http as hf_http

    monkeypatch.setattr(hf_http.time, "sleep", lambda _s: None)  # skip huggingface_hub's retry back-off
    with pytest.raises(HubError) as err:
        search_models(NetworkGate(), "qwen")
    message = str(err.value)
    assert message.startswith("Could not connect to http://127.0.0.1:")
    assert "\n" not in message and "Traceback" not in message
