"""Bad input to the generating endpoints is a 400 in the API's error shape before any generation:
a lone surrogate (\\ud800) in a message or the model's name, a body nested past MAX_DEPTH."""

from __future__ import annotations

from typing import Any

import pytest

from app.serve.api.body_check import MAX_DEPTH, check_body
from app.serve.api.chat_request import read_chat_request
from app.serve.api.completions_api import read_completion_request
from app.serve.api.messages_request import read_messages_request
from app.serve.http.errors import ApiError


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def chat(**extra: Any) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **extra}


def messages(**extra: Any) -> dict:
    return {"model": "tiny", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **extra}


BAD = [
    ("chat", chat(model="tiny\ud800"), "model"),
    ("chat", chat(messages=[{"role": "user", "content": "a\ud800b"}]), "messages[0].content"),
    ("chat", chat(response_format={"type": "json_schema", "json_schema": {"schema": nested(480)}}), "nested more than"),
    ("messages", messages(model="\ud800"), "model"),
    ("messages", messages(messages=[{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]), "messages[0].content[0].text"),
    ("messages", messages(output_config={"format": {"type": "json_schema", "schema": nested(480)}}), "nested more than"),
    ("completions", {"model": "tiny\ud800", "prompt": "x"}, "model"),
    ("completions", {"model": "tiny", "prompt": "x\ud800"}, "prompt"),
    ("completions", {"model": "tiny", "prompt": "x", "extra": nested(480)}, "nested more than"),
]


@pytest.mark.parametrize(("endpoint", "body", "where"), BAD)
def test_bad_text_or_depth_is_a_400_naming_where(endpoint: str, body: dict, where: str) -> None:
    with pytest.raises(ApiError) as info:
        if endpoint == "chat":
            read_chat_request(body)
        elif endpoint == "messages":
            read_messages_request(body)
        else:
            read_completion_request(body)
    error = info.value
    assert error.status == 400 and where in error.message, error.message
    error.response()  # the answer itself can be written (the surrogate is not echoed)
    error.message.encode("utf-8")


def test_a_key_with_a_surrogate_and_the_depth_limit() -> None:
    with pytest.raises(ApiError, match="a key in"):
        check_body({"a": {"\ud800": 1}})
    check_body(nested(MAX_DEPTH - 1))
    with pytest.raises(ApiError, match=f"more than {MAX_DEPTH}"):
        check_body(nested(MAX_DEPTH))
