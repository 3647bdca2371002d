"""Memory estimate vs measured with 4 slots (within 10%): Cove's engine loads the tiny model with
`parallel=4` at its default context, and the KV cache and compute buffer llama.cpp reports
(`LoadedModel.kv_bytes`, `compute_bytes`) match the estimate's for 4 slots; the cache is four
times one slot's and the compute buffer the same as one slot's, in llama.cpp as in the estimate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient
from models.gguf_validate import read_gguf_header
from models.memory_estimate import compute_parts
from models.model_facts import facts_from_header
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(300)
N_CTX = 8192


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Trained for 8192 tokens, so Cove's default context is 8192 and the KV cache is a real share
    # (at the tiny model's usual 512, its 64-wide compute buffer is the one the estimate overshoots).
    return write_tiny_gguf(tmp_path_factory.mktemp("slots") / "tiny-8k.gguf", n_ctx_train=N_CTX)


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


def test_memory_estimate_vs_measured_with_4_slots_within_10_percent(engine: EngineClient, model: Path) -> None:
    facts = facts_from_header(read_gguf_header(model))
    four = engine.load(model, n_ctx=N_CTX, n_threads=1, parallel=4)
    est = compute_parts(facts, None, N_CTX, 0, "f16", slots=4)
    assert (four.slots, four.n_ctx) == (4, N_CTX) and four.kv_bytes > 0 and four.compute_bytes > 0
    assert abs(four.kv_bytes - est.kv_ram) <= 0.10 * est.kv_ram, (four.kv_bytes, est.kv_ram)
    assert abs(four.compute_bytes - est.compute_ram) <= 0.10 * est.compute_ram, (four.compute_bytes, est.compute_ram)
    one = engine.load(model, n_ctx=N_CTX, n_threads=1, parallel=1)
    assert four.kv_bytes == 4 * one.kv_bytes and four.compute_bytes == one.compute_bytes
    assert compute_parts(facts, None, N_CTX, 0, "f16").compute_ram == est.compute_ram
