"""Structured output holds for any schema of the supported subset (issue 47 item 3): hypothesis
draws schemas (tests/support/json_schemas.py: nested objects and arrays, bounded strings, formats,
patterns, integer and number bounds, enum, const, anyOf, oneOf, allOf, $ref), and the real engine
with the tiny random model samples under each one's grammar at temperature 1 over several seeds.
Every reply that ends (the grammar closed it) parses and validates against its schema with
jsonschema, formats included: not one invalid."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from app.engine.client import EngineClient
from app.engine.grammar import grammar_for
from app.engine.request import ReplyRequest, Sampling
from tests.support.json_schemas import check_schema, problems, schemas

pytestmark = pytest.mark.timeout(600)

SEEDS = (1, 2, 3, 4)
EXAMPLES = 100
MAX_TOKENS = 300


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(tiny_gguf, n_threads=1)
        yield client


def test_every_reply_that_ends_is_valid_under_its_generated_schema(engine: EngineClient) -> None:
    tally: Counter[str] = Counter()
    invalid: list[dict[str, Any]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(schemas())
    def sample_under(schema: dict[str, Any]) -> None:
        check_schema(schema)
        gbnf = grammar_for({"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}})
        assert gbnf is not None
        for seed in SEEDS:
            fin = engine.generate(
                ReplyRequest.chat(
                    [{"role": "user", "content": "fill it in"}],
                    sampling=Sampling(max_tokens=MAX_TOKENS, seed=seed, temperature=1.0, top_k=0),
                    grammar=gbnf,
                )
            ).wait()
            assert fin.status in ("complete", "length"), (fin.status, fin.error)
            tally[fin.status] += 1
            if fin.status != "complete":  # cut at max_tokens: not a whole value
                continue
            try:
                value = json.loads(fin.text)
            except ValueError as exc:
                invalid.append({"schema": schema, "seed": seed, "text": fin.text, "problems": [f"not JSON: {exc}"]})
                raise AssertionError(json.dumps(invalid[-1], ensure_ascii=False, indent=1)) from None
            found = problems(value, schema)
            if found:
                invalid.append({"schema": schema, "seed": seed, "text": fin.text, "problems": found})
            assert not found, json.dumps(invalid[-1], ensure_ascii=False, indent=1)

    sample_under()
    total = tally["complete"] + tally["length"]
    assert total >= EXAMPLES * len(SEEDS) and not invalid
    assert tally["complete"] >= 0.7 * total, tally  # most replies end within max_tokens, so most were checked
