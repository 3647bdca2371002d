"""Sampling under a grammar as llama.cpp's own common sampler does it: the sampler chain picks a
token from the unconstrained candidates, the grammar checks only that token, and only when it
refuses is the grammar applied to every candidate and the chain run again.

Host-internal. llama-cpp-python puts the grammar inside the chain, where it is applied to every
token of the vocabulary on every step (262,144 candidates for Gemma 3); most steps the chain's own
choice is allowed, so checking one candidate is enough.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.float32), ("p", np.float32)], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)


class GrammarFirstSampler:
    """Stands in for llama-cpp-python's LlamaSampler in Llama.sample(): only `sample(ctx, idx)`.

    With a `trigger` (a lazy grammar, for tool calls), tokens are sampled freely until the reply's
    text ends with the trigger (whitespace after it aside); from the next token on the grammar,
    whose root starts after the trigger, applies. `piece` gives a token's text with control
    tokens shown (a trigger may be one)."""

    def __init__(self, chain: Any, vocab: Any, gbnf: str, n_vocab: int, trigger: bytes | None = None,
                 piece: Callable[[int], bytes] | None = None) -> None:
        self._chain = chain  # a _internals.LlamaSampler without the grammar; owns its C chain
        self._waiting = trigger if trigger and piece is not None else None
        self._piece = piece
        self._seen = b""
        self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self._n_vocab = n_vocab
        self._cur = np.empty(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self._one = llama_cpp.llama_token_data()
        self._one_array = llama_cpp.llama_token_data_array(ctypes.pointer(self._one), 1, -1, False)

    def close(self) -> None:
        if self._grammar:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()

    def _candidates(self, ctx: Any, idx: int) -> llama_cpp.llama_token_data_array:
        logits = llama_cpp.llama_get_logits_ith(ctx, idx)
        cur = self._cur
        cur["id"] = self._ids
        cur["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        cur["p"] = 0.0
        data = cur.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
        return llama_cpp.llama_token_data_array(data, self._n_vocab, -1, False)

    def _allowed(self, token: int) -> bool:
        one, arr = self._one, self._one_array
        one.id, one.logit, one.p = token, 1.0, 0.0  # type: ignore[assignment]
        arr.size, arr.selected, arr.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        return not math.isinf(one.logit)

    def _watch(self, token: int) -> None:
        """Keep the reply's last text and switch the grammar on once it ends with the trigger."""
        assert self._waiting is not None and self._piece is not None
        self._seen = (self._seen + self._piece(token))[-4 * len(self._waiting) - 64:]
        if self._seen.rstrip().endswith(self._waiting):
            self._waiting = None

    def sample(self, ctx: Any, idx: int) -> int:
        chain = self._chain.sampler
        arr = self._candidates(ctx.ctx, idx)
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(arr))
        token = int(self._cur[arr.selected]["id"])
        if self._waiting is not None:  # a lazy grammar not yet switched on: the chain's own choice
            llama_cpp.llama_sampler_accept(chain, token)
            self._watch(token)
            return token
        if not self._allowed(token):
            arr = self._candidates(ctx.ctx, idx)  # the chain reordered and cut the array: start again
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
            llama_cpp.llama_sampler_apply(chain, ctypes.byref(arr))
            token = int(self._cur[arr.selected]["id"])
        llama_cpp.llama_sampler_accept(self._grammar, token)
        llama_cpp.llama_sampler_accept(chain, token)
        return token


class GrammarSlot:
    """The grammar of the reply about to start; Llama.generate() makes its sampler through
    _init_sampler, which install() wraps to sample grammar-first when the slot holds one."""

    def __init__(self) -> None:
        self.gbnf: str | None = None
        self.trigger: bytes | None = None  # a lazy grammar's trigger (None: the grammar applies from the start)
        self.piece: Callable[[int], bytes] | None = None  # a token's text, control tokens shown

    @classmethod
    def install(cls, llm: Any, vocab: Any) -> GrammarSlot:
        slot = cls()
        n_vocab = int(llm.n_vocab())
        make: Callable[..., Any] = llm._init_sampler

        def init_sampler(**kwargs: Any) -> Any:
            chain = make(**kwargs)
            if slot.gbnf is None:
                return chain
            return GrammarFirstSampler(chain, vocab, slot.gbnf, n_vocab, slot.trigger, slot.piece)

        llm._init_sampler = init_sampler
        return slot
