"""`"model": "auto"` through `cove serve` and the official clients, on tiny models that declare the
sizes of real ones: GET /v1/models lists "auto"; a short question goes to the larger model, a
request for code to the faster one, a request with tools to a model whose template knows tools;
the response's `model` is the chosen one and its `cove` object says why (whole and streamed, in
the OpenAI, Anthropic and Responses APIs); the record keeps the choice; a request no model can
serve is a 400 with the sentence of what is missing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from app.serve.http.runner import ServerThread
from app.store.request_log import RequestLog
from tests.app.images.test_data_uri import png_bytes
from tests.support.serve_fixture import server_thread
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tool_turns import QWEN_TEMPLATE

CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
QUESTION = [{"role": "user", "content": "What is the capital of Australia?"}]
CODE = [{"role": "user", "content": "Write a Python function that reverses the words of a sentence."}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def server(cove_core, tmp_path: Path) -> Iterator[ServerThread]:
    qwen = QWEN_TEMPLATE.read_text()
    for name, template, params in (
        ("coder-0.5b", qwen, 494_000_000),
        ("coder-1.5b", qwen, 1_540_000_000),
        ("chatml-3b", CHATML, 3_000_000_000),  # a template that does not know tools
        ("base-7b", None, 7_000_000_000),  # no chat template
    ):
        path = write_tiny_gguf(tmp_path / f"{name}.gguf", chat_template=template, n_ctx_train=2048, parameter_count=params)
        cove_core.library.import_file(path, name=name)
    with server_thread(cove_core.paths) as thread:
        yield thread


def _client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.address, api_key="none", max_retries=0)


def test_models_lists_auto_first_with_what_it_chooses_among(server) -> None:
    listed = _client(server).models.list().data
    assert listed[0].id == "auto" and listed[0].owned_by == "cove"
    assert sorted(listed[0].model_extra["cove"]["chooses_among"]) == ["base-7b", "chatml-3b", "coder-0.5b", "coder-1.5b", "tiny-llama"]
    assert _client(server).models.retrieve("auto").model_extra["cove"]["auto"] is True


def test_a_short_question_goes_to_the_larger_model_and_code_to_the_faster_saying_why(server, cove_core) -> None:
    client = _client(server)
    # Code first: once a model has replied, its measured speed (the tiny model's, hundreds of tokens
    # a second) counts instead of the estimate from its size. A reply of up to 4 tokens would cost
    # any model little, so the larger would win: room for a function.
    code = client.chat.completions.create(model="AUTO", messages=CODE, max_tokens=400, temperature=0)
    assert (
        code.model == "coder-0.5b" and code.model_extra["cove"]["auto"]["why"] == "code; chatml-3b is stronger but about 3.5× slower here"
    )
    (opened,) = [e for e in RequestLog(cove_core.db).entries() if "auto" in json.loads(e["params"])]
    assert opened["model_name"] == "coder-0.5b"
    assert json.loads(opened["params"])["auto"] == code.model_extra["cove"]["auto"]  # the record keeps the choice and the others
    fact = client.chat.completions.create(model="auto", messages=QUESTION, max_tokens=4, temperature=0)
    said = fact.model_extra["cove"]["auto"]
    assert fact.model == "chatml-3b" and said["chosen"] == "chatml-3b" and said["kind"] == "fact"
    assert said["why"] == "a short question; coder-0.5b is faster but weaker at a short question"
    assert {"model": "base-7b", "why": "it is a base model (no chat template)"} in said["passed_over"]


def test_tools_go_to_a_model_whose_template_knows_tools_streamed_too(server) -> None:
    stream = _client(server).chat.completions.create(
        model="auto", messages=QUESTION, tools=[WEATHER_TOOL], max_tokens=4, temperature=0, stream=True
    )
    chunks = list(stream)
    first = chunks[0]
    said = first.model_extra["cove"]["auto"]
    assert first.model == "coder-1.5b" and all(c.model == "coder-1.5b" for c in chunks)
    assert said["why"] == "a short question; coder-0.5b is faster but weaker at a short question"
    assert dict((p["model"], p["why"]) for p in said["passed_over"]) == {
        "base-7b": "it is a base model (no chat template)",
        "tiny-llama": "it is a base model (no chat template)",  # the suite's own model
        "chatml-3b": "its template does not know tools",
        "coder-0.5b": "faster but weaker at a short question",
    }
    assert "cove" not in (chunks[-1].model_extra or {})  # said once, in the first chunk


def test_anthropic_and_responses_name_the_chosen_model(server) -> None:
    message = anthropic.Anthropic(base_url=server.address.removesuffix("/v1"), api_key="none", max_retries=0).messages.create(
        model="auto", max_tokens=400, messages=CODE
    )
    assert message.model == "coder-0.5b" and message.model_extra["cove"]["auto"]["kind"] == "code"
    response = _client(server).responses.create(model="auto", input="What is the capital of Australia?", max_output_tokens=16)
    assert response.model == "chatml-3b" and response.model_extra["cove"]["auto"]["chosen"] == "chatml-3b"


def test_a_request_no_model_can_serve_is_a_400_naming_what_is_missing(server) -> None:
    png = base64.b64encode(png_bytes()).decode()
    pictured = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            ],
        }
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        _client(server).chat.completions.create(model="auto", messages=pictured, max_tokens=4)
    assert "none of your models can see images: install a vision model" in refused.value.message
    assert refused.value.body["param"] == "model"
    named = httpx.post(f"{server.address}/chat/completions", json={"model": "no-such", "messages": QUESTION}, timeout=30)
    assert named.status_code == 404  # a model named by name is still that model or a 404


def test_what_the_person_taught_auto_in_the_window_counts_in_the_api_too(server, cove_core) -> None:
    from app.routing.preferences import learn

    client = _client(server)
    before = client.chat.completions.create(model="auto", messages=QUESTION, max_tokens=2, temperature=0)
    assert before.model != "coder-0.5b"
    # Written to the settings file after the server started, as the window would.
    learn(cove_core.paths.settings_file, cove_core.settings, "fact", "coder-0.5b", "regenerated")
    after = client.chat.completions.create(model="auto", messages=QUESTION, max_tokens=2, temperature=0)
    said = after.model_extra["cove"]["auto"]
    assert after.model == "coder-0.5b" and said["why"] == "a short question; you chose it for a short question before"


def test_a_conversation_that_goes_on_names_the_model_that_holds_it(server) -> None:
    client = _client(server)
    first = client.chat.completions.create(model="auto", messages=CODE, max_tokens=400, temperature=0)
    assert first.model == "coder-0.5b" and "holds" not in first.model_extra["cove"]["auto"]
    reply = first.choices[0].message.content
    assert reply
    more = [*CODE, {"role": "assistant", "content": reply}, {"role": "user", "content": "Now make it skip empty words."}]
    again = client.chat.completions.create(model="auto", messages=more, max_tokens=400, temperature=0)
    assert again.model_extra["cove"]["auto"]["holds"] == "coder-0.5b"
    # A reply no model here wrote: nothing holds the conversation.
    other = [
        *CODE,
        {"role": "assistant", "content": "def reverse_words(s): ..."},
        {"role": "user", "content": "Now make it skip empty words."},
    ]
    assert "holds" not in client.chat.completions.create(model="auto", messages=other, max_tokens=4).model_extra["cove"]["auto"]
