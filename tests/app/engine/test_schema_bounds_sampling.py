"""A number's and an integer's minimum, maximum, exclusiveMinimum and exclusiveMaximum hold in a
sampled reply: the real engine and the tiny random model, at temperature 1 over several seeds,
never write a number out of bounds (llama-cpp-python's converter ignored the bounds: "hours" came
back as 632260094 and "share" as 379E89732752)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from app.engine.client import EngineClient
from app.engine.grammar import grammar_for
from app.engine.request import ReplyRequest, Sampling

pytestmark = pytest.mark.timeout(300)

SCHEMA = {
    "type": "object",
    "properties": {
        "hours": {"type": "integer", "minimum": 1, "maximum": 48},
        "ratio": {"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 10},
        "year": {"type": "integer", "minimum": 1900},
        "share": {"type": "number", "minimum": 0, "maximum": 1},
        "offset": {"type": "number", "exclusiveMinimum": -2.5, "exclusiveMaximum": 0},
    },
    "required": ["hours", "ratio", "year", "share", "offset"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=1)
        yield client


def test_sampled_integers_stay_within_their_bounds(engine: EngineClient) -> None:
    gbnf = grammar_for({"type": "json_schema", "json_schema": {"name": "span", "schema": SCHEMA, "strict": True}})
    values = []
    for seed in range(12):
        fin = engine.generate(
            ReplyRequest.chat(
                [{"role": "user", "content": "how long?"}],
                sampling=Sampling(max_tokens=200, seed=seed, temperature=1.0, top_k=0),
                grammar=gbnf,
            )
        ).wait()
        assert fin.status in ("complete", "length"), (fin.status, fin.error)
        if fin.status == "complete":
            values.append(json.loads(fin.text))
    assert len(values) >= 8, values  # most replies end within max_tokens
    for value in values:
        jsonschema.validate(value, SCHEMA)
