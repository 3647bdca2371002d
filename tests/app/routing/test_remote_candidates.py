"""The person's servers as Auto's candidates (app/routing/remote.py): a model's size read from its
name, a server that did not answer or that the person never agreed to send to is passed over
with the sentence why, and a server's model wins where it is the better choice."""

from __future__ import annotations

from dataclasses import replace

from app.remote.connections import Connection
from app.remote.remote_model import RemoteModel
from app.routing.auto import choose
from app.routing.candidates import Needs, Speed
from app.routing.remote import UNSAID_PARAMS_B, away_from, remote_candidates, size_from_name
from tests.app.routing.test_auto import SMALL

ASK = Needs(tokens=40, reply=512)


def test_sizes_come_from_the_model_names() -> None:
    assert size_from_name("qwen2.5-coder-1.5b-instruct-q4_k_m") == 1.5
    assert size_from_name("smollm2-135m-instruct") == 0.135
    assert size_from_name("llama3.1:8b") == 8.0
    assert size_from_name("Mistral-7B-Instruct-v0.3") == 7.0
    assert size_from_name("gpt-oss") is None and size_from_name("qwen2.5-coder") is None


def _desk(model_id: str, **kw) -> RemoteModel:
    return RemoteModel(connection="desk", model_id=model_id, host="192.168.1.20:8642", kind="cove", **kw)


def test_a_question_goes_to_the_bigger_model_on_the_desk_and_says_where() -> None:
    desk = remote_candidates([_desk("qwen2.5-7b-instruct", context_length=32768, loaded=True)], {}, {})
    assert desk[0].params_b == 7.0 and desk[0].tools == "native" and not desk[0].vision
    fact = choose("What is the capital of Australia?", ASK, [SMALL, *desk])
    assert fact.model == "qwen2.5-7b-instruct@desk"
    assert fact.why == "a short question; qwen-0.5b is faster but weaker at a short question"


def test_a_desk_that_does_not_answer_is_passed_over_with_why() -> None:
    desk = _desk("qwen2.5-7b-instruct")
    connection = Connection("desk", "https://192.168.1.20:8642/v1", None, "192.168.1.20:8642")
    away = away_from([connection], {"desk": "the connection was refused."})
    assert away == {"desk": "desk cannot be reached now (the connection was refused)"}
    fact = choose("What is the capital of Australia?", ASK, [SMALL, *remote_candidates([desk], {}, away)])
    assert fact.model == "qwen-0.5b"
    assert ("qwen2.5-7b-instruct@desk", "desk cannot be reached now (the connection was refused)") in fact.passed_over


def test_a_public_host_the_person_never_agreed_to_is_not_sent_to() -> None:
    public = Connection("cloud", "https://203.0.113.9:8000/v1", None, "203.0.113.9:8000")
    away = away_from([public], {})
    assert away == {"cloud": "203.0.113.9:8000 is outside your network and you have not agreed to send messages there"}
    agreed = away_from([replace(public, public_ok=True)], {})
    assert agreed == {}


def test_unsaid_sizes_and_contexts_are_taken_the_safe_way() -> None:
    (only,) = remote_candidates([_desk("house-model")], {"house-model@desk": Speed(tg=30.0)}, {})
    assert only.params_b == UNSAID_PARAMS_B and only.context == 4096 and only.speed.tg == 30.0 and not only.loaded
    long = Needs(tokens=6000, reply=512)
    assert choose("Summarise this.", long, [SMALL, only]).model == "qwen-0.5b"
