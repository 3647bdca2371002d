"""The context and batch sizes Cove's engine asks llama.cpp for; the memory estimate and the
engine host both read them from here."""

from __future__ import annotations

MIN_CTX = 256  # llama.cpp pads n_ctx up to a multiple of 256 (llama-context.cpp)
DEFAULT_MAX_CTX = 8192  # no context asked for: the training context, capped at this
UNKNOWN_TRAIN_CTX = 4096  # no context asked for and the model names no training context
MAX_BATCH = 512  # n_batch = n_ubatch = min(n_ctx, MAX_BATCH)


def round_ctx(n: int) -> int:
    """`n` padded up to a multiple of MIN_CTX, as llama.cpp makes it."""
    return max(MIN_CTX, -(-int(n) // MIN_CTX) * MIN_CTX)


def cove_context(n_ctx: int | None, n_ctx_train: int | None) -> int:
    """The context Cove's engine makes: the one asked for, else min(training context, 8192)."""
    if n_ctx:
        return round_ctx(n_ctx)
    return round_ctx(min(n_ctx_train, DEFAULT_MAX_CTX) if n_ctx_train and n_ctx_train > 0 else UNKNOWN_TRAIN_CTX)


def batch_size(n_ctx: int) -> int:
    """n_batch and n_ubatch for a context of `n_ctx` tokens."""
    return min(n_ctx, MAX_BATCH)
