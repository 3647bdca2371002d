"""Opening a model with llama-cpp-python as Cove needs it: the thread count, the KV cache types a
load asks for, and the adjustments Cove makes to `Llama.__init__` while it runs; and the loaded
model's vocabulary (`vocab_of`).

Runs only in the engine host (it imports llama_cpp).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp
from llama_cpp import _internals as llama_internals
from llama_cpp import llama_chat_format

from app.engine.protocol import KV_CACHE_CHOICES, Load
from models.context_size import batch_size, cove_context


class LoadError(Exception):
    """The model could not be loaded; the message is one readable sentence."""


_GGML_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}


def kv_types(req: Load) -> tuple[int, int]:
    """The ggml types of the K and V caches `req` asks for, or LoadError naming what is wrong."""
    for name in (req.type_k, req.type_v):
        if name not in _GGML_TYPES:
            raise LoadError(f"{name!r} is not a KV cache type Cove offers; use one of {', '.join(KV_CACHE_CHOICES)}")
    if req.type_v != "f16" and req.flash_attn is False:
        raise LoadError(f"a {req.type_v} V cache needs flash attention; set flash attention to auto or on, or the V cache to f16")
    return _GGML_TYPES[req.type_k], _GGML_TYPES[req.type_v]


def vocab_of(llm: llama_cpp.Llama) -> llama_cpp.llama_vocab_p:
    """The loaded model's llama.cpp vocabulary, which llama-cpp-python keeps on its model object."""
    return llm._model.vocab


def default_threads() -> int:
    """Physical cores (like llama-bench's default), never more than this process may use."""
    import psutil

    n = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        n = min(n, len(os.sched_getaffinity(0)))
    return max(1, n)


@contextmanager
def llama_init_patches(fa_type: int, n_ctx: int | None, *, extra_buffers: bool = True, n_seq: int = 1) -> Iterator[None]:
    """Four adjustments to Llama.__init__ (llama-cpp-python 0.3.36), undone afterwards.

    1. The context is created with flash_attn_type = fa_type (Llama only offers on/off; None
       means llama.cpp's own AUTO) and, when no n_ctx was asked for, with
       round_ctx(min(n_ctx_train, 8192)) and a batch that fits it; the training context is
       only known once the model is loaded, which is inside Llama.__init__.
    2. Llama.__init__ compiles the GGUF's chat template with jinja2 (an untrusted template
       that fails to compile would fail the load). Cove renders the template itself,
       sandboxed and time-limited, so that compile is skipped.
    3. With extra_buffers False the model is loaded with use_extra_bufts off: llama.cpp keeps
       the weights in plain CPU buffers instead of AMX or repacked ones (cpu_quirks.py).
    4. The context holds `n_seq` sequences (slots), each in a KV stream of its own (kv_unified
       off) of the per-sequence context, so the context made is n_ctx * n_seq cells; Llama only
       sets n_seq_max for embeddings.
    """
    base = llama_internals.LlamaContext

    class _Context(base):  # type: ignore[misc, valid-type]
        def __init__(self, *, model: llama_internals.LlamaModel, params: llama_cpp.llama_context_params, verbose: bool = True) -> None:
            params.flash_attn_type = fa_type
            if n_ctx is None:
                want = cove_context(None, int(model.n_ctx_train()))
                params.n_ctx = want
                params.n_batch = params.n_ubatch = batch_size(want)
            if n_seq > 1:
                params.n_seq_max = n_seq
                params.kv_unified = False
                params.n_ctx = int(params.n_ctx) * n_seq
            super().__init__(model=model, params=params, verbose=verbose)

    class _NoFormatter:
        def __init__(self, **_: object) -> None:
            pass

        def to_chat_handler(self) -> None:
            return None

    # Llama.__init__ looks both names up on these modules at call time.
    saved_fmt = llama_chat_format.Jinja2ChatFormatter
    llama_internals.LlamaContext = _Context  # type: ignore[misc]
    llama_chat_format.Jinja2ChatFormatter = _NoFormatter  # type: ignore[misc, assignment]
    try:
        with model_buffers(extra_buffers):
            yield
    finally:
        llama_internals.LlamaContext = base  # type: ignore[misc]
        llama_chat_format.Jinja2ChatFormatter = saved_fmt  # type: ignore[misc]


@contextmanager
def model_buffers(extra_buffers: bool) -> Iterator[None]:
    """While it runs, a Llama() made loads its weights with llama.cpp's extra CPU buffer types
    (AMX, repacked layouts) only if `extra_buffers`; llama-cpp-python 0.3.36 offers no parameter
    for use_extra_bufts, so its LlamaModel is swapped for one that sets it."""
    if extra_buffers:
        yield
        return
    base = llama_internals.LlamaModel

    class _Model(base):  # type: ignore[misc, valid-type]
        def __init__(self, *, path_model: str, params: llama_cpp.llama_model_params, verbose: bool = True) -> None:
            params.use_extra_bufts = False
            super().__init__(path_model=path_model, params=params, verbose=verbose)

    llama_internals.LlamaModel = _Model  # type: ignore[misc]
    try:
        yield
    finally:
        llama_internals.LlamaModel = base  # type: ignore[misc]
