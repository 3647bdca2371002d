"""Structured output holds for any schema with string fields: with the real engine and the tiny
random model, every reply that finishes under a json_schema grammar parses as JSON and validates
against its schema (jsonschema). The converter's string rule let raw control characters into
strings (invalid JSON); app/engine/grammar.py narrows it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.client import EngineClient
from app.engine.grammar import grammar_for
from app.engine.request import ReplyRequest, Sampling

pytestmark = pytest.mark.timeout(600)

NAMES = st.sampled_from(["name", "city", "note", "title", "code", "tag"])
STRING_FIELD = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda hi: {"type": "string", "maxLength": hi}, st.integers(1, 24)),
    st.builds(lambda lo: {"type": "string", "minLength": lo}, st.integers(1, 6)),
    st.just({"type": "string", "pattern": "^a.b$"}),
    st.lists(st.text(alphabet='abc xyz"\\', min_size=1, max_size=5), min_size=1, max_size=3, unique=True).map(
        lambda values: {"enum": values}
    ),
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    fields = draw(st.dictionaries(NAMES, STRING_FIELD, min_size=1, max_size=3))
    return {"type": "object", "properties": fields, "required": sorted(fields), "additionalProperties": False}


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=1)
        yield client


def test_the_string_rule_keeps_out_what_json_strings_cannot_hold() -> None:
    gbnf = grammar_for(
        {
            "type": "json_schema",
            "json_schema": {
                "schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "pattern": "^x.$"}}}
            },
        }
    )
    assert gbnf is not None
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines())
    single = re.compile(rules["char"].split(" | ")[0])  # the class of characters taken as they are
    assert [c for c in '"\\\x00\x1f\x7f\ud800\udfff' if single.fullmatch(c)] == []
    assert [c for c in " a~\x80é\ud55c\ud7ff\ue000\U0010ffff" if not single.fullmatch(c)] == []
    assert rules["dot"] == rules["char"].split(" ")[0], rules["dot"]


@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(schema=schemas(), seed=st.integers(0, 2**16), temperature=st.sampled_from([0.0, 1.0, 1.5]))
def test_every_finished_reply_parses_and_validates(engine: EngineClient, schema: dict[str, Any], seed: int, temperature: float) -> None:
    gbnf = grammar_for({"type": "json_schema", "json_schema": {"name": "t", "schema": schema}})
    fin = engine.generate(
        ReplyRequest.chat(
            [{"role": "user", "content": "fill it in"}],
            sampling=Sampling(max_tokens=400, seed=seed, temperature=temperature, top_k=0),
            grammar=gbnf,
        )
    ).wait()
    assert fin.status in ("complete", "length"), (fin.status, fin.error)
    if fin.status == "complete":  # the grammar ended it; a reply cut at max_tokens is not a whole value
        jsonschema.validate(json.loads(fin.text), schema)
        assert "\ufffd" not in fin.text  # the tiny model's byte tokens write well-formed UTF-8 only
