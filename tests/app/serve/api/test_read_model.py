"""Every endpoint reads the body and its model's name the same way (chat_request.read_model): a
body that is not a JSON object, a lone surrogate, a missing model: one ApiError each, in the
endpoint's own words for the model."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.serve.api.chat_request import read_chat_request
from app.serve.api.completions_api import read_completion_request
from app.serve.api.embeddings_api import read_inputs
from app.serve.api.messages_request import read_messages_request
from app.serve.api.responses_request import read_responses_request
from app.serve.http.errors import ApiError

READERS: dict[str, tuple[Callable[[object], object], str]] = {
    "chat": (read_chat_request, "'model' is required: the name of an installed model"),
    "completions": (read_completion_request, "'model' is required: the name of an installed model"),
    "responses": (read_responses_request, "'model' is required: the name of an installed model"),
    "messages": (read_messages_request, "model: Field required"),
    "embeddings": (read_inputs, "'model' is required: the name of an installed embedding model"),
}


@pytest.mark.parametrize("endpoint", READERS)
def test_each_reader_refuses_a_body_that_is_not_an_object(endpoint: str) -> None:
    reader, _ = READERS[endpoint]
    with pytest.raises(ApiError) as err:
        reader(["not", "an", "object"])
    assert err.value.status == 400 and err.value.message == "the request body must be a JSON object"


@pytest.mark.parametrize("endpoint", READERS)
@pytest.mark.parametrize("model", [None, "", 7])
def test_each_reader_needs_a_model_in_its_own_words(endpoint: str, model: object) -> None:
    reader, words = READERS[endpoint]
    body = {} if model is None else {"model": model}
    with pytest.raises(ApiError) as err:
        reader(body)
    assert err.value.status == 400 and err.value.param == "model" and err.value.message.startswith(words)


@pytest.mark.parametrize("endpoint", READERS)
def test_each_reader_refuses_a_lone_surrogate_before_anything_else(endpoint: str) -> None:
    reader, _ = READERS[endpoint]
    with pytest.raises(ApiError) as err:
        reader({"model": "tiny", "input": "\ud800", "prompt": "\ud800", "messages": [{"role": "user", "content": "\ud800"}]})
    assert err.value.status == 400 and "surrogate" in err.value.message
