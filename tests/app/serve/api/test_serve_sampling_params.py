"""The sampling parameters the API accepts do something or are refused by name: logit_bias and
presence/frequency penalties reach the engine's sampler, output_config.format becomes the
json_schema grammar, logprobs and a reasoning_effort or thinking that names no setting are a 400
(a setting the model's template cannot honour is refused by the engine: tests/app/serve/api/test_reasoning_api.py),
and a chat request without max_tokens has no cap of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient
from app.engine.request import ReplyRequest, Sampling
from app.serve.api.chat_request import read_chat_request, read_sampling
from app.serve.api.messages_request import read_messages_request
from app.serve.http.errors import ApiError
from app.settings import SamplingParams
from tests.support.tiny_model import tiny_vocab

pytestmark = pytest.mark.timeout(120)


def chat(**extra: object) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **extra}


def messages(**extra: object) -> dict:
    return {"model": "tiny", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **extra}


def test_a_chat_request_without_max_tokens_has_no_cap_and_completions_keep_16() -> None:
    assert read_chat_request(chat()).params.max_tokens is None
    assert read_chat_request(chat(max_tokens=7)).params.max_tokens == 7
    assert read_sampling({}, 16).params.max_tokens == 16
    assert SamplingParams().max_tokens == 512  # the window's own default is its own


def test_penalties_and_logit_bias_are_read() -> None:
    params = read_chat_request(chat(presence_penalty=1.5, frequency_penalty=-0.5, logit_bias={"42": 100, "7": -100})).params
    assert (params.presence_penalty, params.frequency_penalty) == (1.5, -0.5)
    assert params.logit_bias == ((42, 100.0), (7, -100.0))
    assert SamplingParams.from_dict(params.to_dict()) == params  # as the history stores it


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (chat(logprobs=True), "logprobs"),
        (chat(top_logprobs=3), "top_logprobs"),
        (chat(reasoning_effort="extreme"), "reasoning_effort"),
        (chat(reasoning_effort=3), "reasoning_effort"),
        (chat(presence_penalty=3), "presence_penalty"),
        (chat(logit_bias={"x": 1}), "logit_bias"),
        (chat(logit_bias={"1": 101}), "logit_bias"),
        (chat(logit_bias={str(i): 1 for i in range(301)}), "logit_bias"),
    ],
)
def test_what_cove_cannot_honour_is_refused_by_name(body: dict, param: str) -> None:
    with pytest.raises(ApiError) as info:
        read_chat_request(body)
    assert info.value.status == 400 and info.value.param == param and param in info.value.message


def test_logprobs_false_and_each_reasoning_effort_are_accepted() -> None:
    read_chat_request(chat(logprobs=False, reasoning_effort="none"))
    assert read_chat_request(chat(reasoning_effort="high")).reasoning == "high"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (messages(thinking={"type": "sometimes"}), "thinking"),
        (messages(thinking="yes"), "thinking"),
        (messages(output_config={"effort": "high"}), "output_config"),
        (messages(output_config={"format": {"type": "xml"}}), "output_config.format"),
        (
            messages(output_config={"format": {"type": "json_schema", "schema": {"type": "string", "maxLength": 99999}}}),
            "output_config.format",
        ),
    ],
)
def test_messages_refuse_thinking_and_bad_formats_by_name(body: dict, param: str) -> None:
    with pytest.raises(ApiError) as info:
        read_messages_request(body)
    assert info.value.status == 400 and info.value.param == param


def test_output_config_format_is_the_json_schema_grammar() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    req = read_messages_request(
        messages(output_config={"format": {"type": "json_schema", "schema": schema}}, thinking={"type": "disabled"})
    )
    assert req.grammar is not None and "root ::=" in req.grammar and req.reply_format is not None
    assert read_messages_request(messages(output_format={"type": "json_schema", "schema": schema})).grammar == req.grammar


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=1)
        yield client


def reply(engine: EngineClient, max_tokens: int = 12, **kw: object) -> str:
    sampling = Sampling(max_tokens=max_tokens, seed=3, **kw)  # type: ignore[arg-type]
    fin = engine.generate(ReplyRequest.chat([{"role": "user", "content": "say something"}], sampling=sampling)).wait()
    assert fin.status in ("complete", "length"), fin.error
    return fin.text


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_logit_bias_makes_the_engine_write_the_token(engine: EngineClient, temperature: float) -> None:
    token = tiny_vocab()[0].index("q")
    assert set(reply(engine, temperature=temperature, logit_bias=[(token, 100.0)])) == {"q"}


def test_penalties_change_the_reply(engine: EngineClient) -> None:
    plain = reply(engine, 200, temperature=0.0)
    assert reply(engine, 200, temperature=0.0) == plain
    assert reply(engine, 200, temperature=0.0, frequency_penalty=2.0, presence_penalty=2.0) != plain
