"""TopKPick.top (app/engine/host/token_pick.py) finds exactly the k largest logits, whichever way it
searches: from the last token's k-th largest, within widening windows of the largest, or the whole
row; rows drawn with hypothesis move their logits between tokens by small and large amounts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.host.token_pick import _NEAR_MAX, TopKPick

N_VOCAB = 20_000


def k_largest(row: np.ndarray, k: int) -> set[int]:
    return set(np.argsort(row, kind="stable")[-k:].tolist())


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.sampled_from([1, 5, 40]),
    shifts=st.lists(st.floats(-30, 30), min_size=2, max_size=6),
    spreads=st.lists(st.floats(0.1, 20), min_size=6, max_size=6),
)
def test_the_k_largest_are_found_however_the_logits_move(seed: int, k: int, shifts: list[float], spreads: list[float]) -> None:
    rng = np.random.default_rng(seed)
    pick = TopKPick(k, 0.95, 0.05, 0.8, seed)
    try:
        for shift, spread in zip(shifts, spreads):
            row = (rng.permutation(N_VOCAB).astype(np.float32) / N_VOCAB * spread + shift).astype(np.float32)
            row[rng.integers(0, N_VOCAB, 3)] += spread  # a few far ahead
            assert set(pick.top(row).tolist()) == k_largest(row, k)
    finally:
        pick.close()


def test_a_flat_row_after_a_peaked_one_is_searched_again() -> None:
    """More than _NEAR_MAX logits at or above the carried threshold: the windows decide instead."""
    pick = TopKPick(40, 0.95, 0.05, 0.8, 1)
    try:
        peaked = np.linspace(-50, 0, N_VOCAB, dtype=np.float32)
        assert set(pick.top(peaked).tolist()) == k_largest(peaked, 40)
        flat = np.linspace(-1, 0, N_VOCAB, dtype=np.float32) + 5
        assert (flat >= pick._kth - 2.0).sum() > _NEAR_MAX
        assert set(pick.top(flat).tolist()) == k_largest(flat, 40)
    finally:
        pick.close()
