"""`cove serve`'s Anthropic Messages endpoint with a real client no one here wrote: the official
`anthropic` package against the server on 127.0.0.1 with the tiny model (whole messages and
streams, stop sequences), the errors as its exception types, the written record, keys, and a
client that leaves mid-stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from app.serve.api.anthropic_api import error_type, stop_of
from app.serve.http.http import CHAT_BODY_BYTES
from app.statuses import MessageStatus
from app.store.history import Message
from app.turn.events import EndEvent
from tests.support.serve_fixture import Served, cove_serve

GREEDY = {"temperature": 0}  # in the body: newer clients have no temperature argument


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # A context of 8,192 tokens: a reply of thousands of tokens fits, so one a client leaves is
    # still being written when it goes.
    with cove_serve(tmp_path_factory.mktemp("serve-anthropic"), n_ctx_train=8192) as running:
        yield running


def client(served: Served, key: str = "unused") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.url, api_key=key, max_retries=0, timeout=60)


def post(served: Served, body: dict[str, Any]) -> anthropic.types.Message:
    """A raw body through the client (to send what its typed arguments would not let through)."""
    return client(served).post("/v1/messages", body=body, cast_to=anthropic.types.Message)


def test_a_message_with_a_system_prompt_has_text_usage_and_coves_timings(served: Served) -> None:
    ask: dict[str, Any] = {"model": "tiny", "max_tokens": 6, "messages": [{"role": "user", "content": "hi"}], "extra_body": GREEDY}
    plain = client(served).messages.create(**ask)
    # Longer than the line a base model (the tiny one) is given when there is no system prompt.
    reply = client(served).messages.create(**ask, system="Be brief and kind, and say only what you know. " * 4)
    assert reply.id.startswith("msg_") and reply.type == "message" and reply.role == "assistant" and reply.model == "tiny"
    assert [block.type for block in reply.content] == ["text"] and reply.content[0].text
    assert reply.stop_reason in ("end_turn", "max_tokens") and reply.stop_sequence is None
    assert 1 <= reply.usage.output_tokens <= 6 and reply.usage.cache_read_input_tokens is not None
    prompt = reply.usage.input_tokens + reply.usage.cache_read_input_tokens
    assert prompt > plain.usage.input_tokens + (plain.usage.cache_read_input_tokens or 0)  # the system prompt was read
    timings = reply.model_extra["timings"]
    assert timings["ttft_ms"] > 0 and set(timings) == {"prompt_ms", "ttft_ms", "tokens_per_second", "cached_tokens"}
    assert timings["cached_tokens"] == reply.usage.cache_read_input_tokens


def test_a_streamed_message_gives_the_text_and_the_final_stop_reason_and_usage(served: Served) -> None:
    with client(served).messages.stream(
        model="tiny", max_tokens=12, messages=[{"role": "user", "content": "more"}], extra_body=GREEDY
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    # Twelve tokens of the tiny model may arrive within one 20 ms chunk: at least one text delta.
    assert len(pieces) >= 1 and "".join(pieces) == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.stop_sequence is None
    assert final.usage.output_tokens == 12 and final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) > 0
    whole = client(served).messages.create(model="tiny", max_tokens=12, messages=[{"role": "user", "content": "more"}], extra_body=GREEDY)
    assert whole.content[0].text == final.content[0].text  # greedy: the stream is the same reply


def test_the_stream_is_anthropics_sequence_of_named_events(served: Served) -> None:
    # Greedy: the same five tokens every time (sampled, the random model may end its turn sooner).
    body = {"model": "tiny", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "x"}], **GREEDY}
    response = httpx.post(f"{served.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=60)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [block.split("\n", 1) for block in response.text.strip().split("\n\n")]
    names = [name.removeprefix("event: ") for name, _ in events]
    data = [json.loads(line.removeprefix("data: ")) for _, line in events]
    deltas = names.count("content_block_delta")
    assert (
        names
        == [
            "message_start",
            "content_block_start",
            "ping",
            *["content_block_delta"] * deltas,
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        and deltas >= 1
    )
    assert all(d["type"] == name for d, name in zip(data, names))
    start = data[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["input_tokens"] > 0
    assert data[-2]["delta"]["stop_reason"] == "max_tokens" and data[-2]["usage"]["output_tokens"] == 5


def test_a_stop_sequence_ends_the_reply_and_is_named(served: Served) -> None:
    # Nearly every letter pair of the tiny model's vocabulary is a token, so in up to 300
    # tokens an "e" comes (greedy: the same reply every time).
    reply = client(served).messages.create(
        model="tiny", max_tokens=300, messages=[{"role": "user", "content": "hi"}], stop_sequences=["e"], extra_body=GREEDY
    )
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "e"
    assert "e" not in reply.content[0].text and reply.usage.output_tokens < 300
    with client(served).messages.stream(
        model="tiny", max_tokens=300, messages=[{"role": "user", "content": "hi"}], stop_sequences=["e"], extra_body=GREEDY
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "e" and "e" not in final.content[0].text


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        ({"model": "no-such-model", "max_tokens": 5, "messages": HI}, anthropic.NotFoundError, "not installed"),
        ({"model": "tiny", "messages": HI}, anthropic.BadRequestError, "max_tokens"),
        ({"model": "tiny", "max_tokens": "ten", "messages": HI}, anthropic.BadRequestError, "max_tokens"),
        ({"model": "tiny", "max_tokens": 5, "messages": "hi"}, anthropic.BadRequestError, "messages"),
        ({"model": "tiny", "max_tokens": 5, "messages": []}, anthropic.BadRequestError, "messages"),
        (
            {"model": "tiny", "max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]},
            anthropic.BadRequestError,
            "top-level 'system'",
        ),
        (
            {
                "model": "tiny",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is this?"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                        ],
                    }
                ],
            },
            anthropic.BadRequestError,
            "messages.0.content.1 is damaged or cut short",  # a PNG's first 8 bytes alone
        ),
        (
            {
                "model": "tiny",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}],
            },
            anthropic.BadRequestError,
            "'tool_result'",
        ),
        (
            {"model": "tiny", "max_tokens": 5, "messages": [*HI, {"role": "assistant", "content": "Sure"}]},
            anthropic.BadRequestError,
            "prefill",
        ),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "temperature": 1.5}, anthropic.BadRequestError, "temperature"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "top_k": "many"}, anthropic.BadRequestError, "top_k"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "stop_sequences": "e"}, anthropic.BadRequestError, "stop_sequences"),
        ({"model": "tiny", "max_tokens": 5, "messages": HI, "system": [{"type": "image"}]}, anthropic.BadRequestError, "system"),
    ],
)
def test_bad_requests_are_the_clients_error_types_in_anthropics_shape(served: Served, body: dict, error: type, words: str) -> None:
    with pytest.raises(error) as caught:
        post(served, body)
    kind = "not_found_error" if error is anthropic.NotFoundError else "invalid_request_error"
    assert caught.value.body == {"type": "error", "error": {"type": kind, "message": caught.value.body["error"]["message"]}}
    assert words in caught.value.body["error"]["message"] and "Traceback" not in caught.value.message


def test_unknown_fields_and_metadata_are_ignored_and_sampling_settings_taken(served: Served) -> None:
    reply = client(served).messages.create(
        model="tiny",
        max_tokens=3,
        messages=HI,
        metadata={"user_id": "me"},
        extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 20, "wizardry": {"x": 1}},
    )
    assert reply.content[0].text and 1 <= reply.usage.output_tokens <= 3
    params = json.loads(served.requests()[-1]["params"])
    assert params["temperature"] == 0.5 and params["top_p"] == 0.9 and params["top_k"] == 20 and params["max_tokens"] == 3


def test_a_prompt_longer_than_the_context_is_a_bad_request_whole_or_streamed(served: Served) -> None:
    long = [{"role": "user", "content": "hello world " * 5000}]  # about 10,000 tokens; the context holds 8,192
    with pytest.raises(anthropic.BadRequestError) as caught:
        client(served).messages.create(model="tiny", max_tokens=5, messages=long)
    assert "context" in caught.value.body["error"]["message"]
    # A stream begins at the reply's first event: one that cannot start is an error response.
    with (
        pytest.raises(anthropic.BadRequestError) as streamed,
        client(served).messages.stream(model="tiny", max_tokens=5, messages=long) as stream,
    ):
        list(stream.text_stream)
    assert streamed.value.body["type"] == "error" and streamed.value.body["error"]["type"] == "invalid_request_error"
    assert "8,192" in streamed.value.body["error"]["message"]


def test_malformed_json_and_an_oversized_body_are_refused_in_anthropics_shape(served: Served) -> None:
    url = f"{served.url}/v1/messages"
    bad = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["type"] == "error" and bad.json()["error"]["type"] == "invalid_request_error"
    huge = httpx.post(
        url,
        content=b'{"model": "tiny", "x": "' + b"a" * (CHAT_BODY_BYTES + 1) + b'"}',  # (a chat body may hold images)
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert huge.status_code == 413 and huge.json()["error"]["type"] == "request_too_large"


def test_each_message_is_in_the_record_with_its_endpoint(served: Served) -> None:
    before = len(served.requests())
    messages = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "sec"}, {"type": "text", "text": "ond"}]},
    ]
    client(served).messages.create(
        model="tiny", max_tokens=3, system=[{"type": "text", "text": "Be brief."}], messages=messages, extra_body=GREEDY
    )
    with client(served).messages.stream(model="tiny", max_tokens=3, messages=HI, stop_sequences=["zzz"]) as stream:
        stream.until_done()
    entries = served.requests()
    assert len(entries) == before + 2
    whole, streamed = entries[-2:]
    assert all(e["endpoint"] == "/v1/messages" and e["client"] == "local API" and e["model_name"] == "tiny" for e in (whole, streamed))
    assert json.loads(whole["messages"]) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first\n\nsecond"},
    ]  # one turn, as Anthropic's
    assert json.loads(whole["params"])["stream"] is False and json.loads(whole["usage"])["completion_tokens"] == 3
    params = json.loads(streamed["params"])
    assert params["stream"] is True and params["stop"] == ["zzz"] and streamed["status"] == "length"


def test_a_client_that_leaves_mid_stream_stops_the_reply_and_the_next_is_answered(served: Served) -> None:
    body = {
        "model": "tiny",
        "max_tokens": 6000,
        "stream": True,
        **GREEDY,  # greedy, the tiny model never ends a turn
        "messages": [{"role": "user", "content": "go on and on"}],
    }
    with httpx.stream("POST", f"{served.url}/v1/messages", json=body, timeout=60) as response:
        lines = response.iter_lines()
        got = [line for line, _ in zip(lines, range(12)) if line.startswith("event: ")]
        assert got[:3] == ["event: message_start", "event: content_block_start", "event: ping"]
    reply = client(served).messages.create(model="tiny", max_tokens=3, messages=HI)
    assert reply.usage.output_tokens >= 1
    (left,) = [e for e in served.requests() if json.loads(e["messages"]) == body["messages"]]
    assert left["status"] == "cancelled" and json.loads(left["usage"])["completion_tokens"] < 6000


def test_with_a_key_made_a_message_needs_it_and_the_record_names_it(served: Served) -> None:
    made = served.cove("serve", "keys", "add", "writer")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    try:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            client(served).messages.create(model="tiny", max_tokens=2, messages=HI)  # the key "unused"
        assert caught.value.body["error"]["type"] == "authentication_error"
        reply = client(served, key).messages.create(model="tiny", max_tokens=2, messages=HI)  # sent as x-api-key
        assert reply.content[0].text and served.requests()[-1]["client"] == "writer"
    finally:
        assert served.cove("serve", "keys", "remove", "writer").returncode == 0
    assert client(served).messages.create(model="tiny", max_tokens=2, messages=HI).content  # open again


@pytest.mark.parametrize(
    ("status", "metrics", "stops", "expected"),
    [
        (MessageStatus.COMPLETE, {}, (), ("end_turn", None)),
        (MessageStatus.COMPLETE, {"stop_sequence": None}, ("a", "b"), ("end_turn", None)),  # the engine says none was met
        (MessageStatus.COMPLETE, {"stop_sequence": "b"}, ("a", "b"), ("stop_sequence", "b")),
        (MessageStatus.COMPLETE, {"stop_sequence": "<end_of_turn>"}, ("a",), ("end_turn", None)),  # not one of the request's
        (MessageStatus.LENGTH, {"gen_tokens": 10}, ("a",), ("max_tokens", None)),
        (MessageStatus.LENGTH, {"gen_tokens": 7}, (), ("model_context_window_exceeded", None)),
    ],
)
def test_the_stop_reason_is_what_the_engine_met(
    status: str, metrics: dict, stops: tuple[str, ...], expected: tuple[str, str | None]
) -> None:
    reply = Message("a", "c", "u", "assistant", "text", status, None, "", "", "m", None, None, {}, metrics, 2)
    assert stop_of(EndEvent(reply), stops, 10) == expected


def test_each_status_has_anthropics_error_type() -> None:
    assert [error_type(s) for s in (400, 401, 403, 404, 413, 429, 500, 503, 507)] == [
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
        "api_error",
    ]
