"""Memory estimate vs measured with 4 slots (within 10%): real llama.cpp opens the tiny model with
4 sequences in a non-unified KV cache at Cove's default context, and the KV cache and compute
buffer it reports match the estimate's for 4 slots; the cache is four times one slot's and the
compute buffer the same as one slot's, in llama.cpp as in the estimate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from models.context_size import cove_context
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

sys.path.insert(0, str(REPO_ROOT / "bench"))

import slots_memory  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Trained for 8192 tokens, so Cove's default context is 8192 and the KV cache is a real share
    # (at the tiny model's 512, its 64-wide compute buffer is the one the estimate overshoots).
    return write_tiny_gguf(tmp_path_factory.mktemp("slots") / "tiny-8k.gguf", n_ctx_train=8192)


def test_memory_estimate_vs_measured_with_4_slots_within_10_percent(model: Path) -> None:
    n_ctx = cove_context(None, 8192)
    four = slots_memory.measure(model, n_ctx, 4)
    assert four.kv_bytes > 0 and four.compute_bytes > 0
    assert abs(four.kv_bytes - four.kv_estimate) <= 0.10 * four.kv_estimate, four
    assert abs(four.compute_bytes - four.compute_estimate) <= 0.10 * four.compute_estimate, four
    assert 0.90 <= four.ratio <= 1.10, four
    one = slots_memory.measure(model, n_ctx, 1)
    assert four.kv_bytes == 4 * one.kv_bytes and four.kv_estimate == 4 * one.kv_estimate
    assert four.compute_bytes == one.compute_bytes and four.compute_estimate == one.compute_estimate
