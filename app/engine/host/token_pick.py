"""Choosing a reply's next token from a row of logits: greedy by argmax, top-k sampling over the
top k candidates only, or llama-cpp-python's sampler chain for everything else (penalties, grammar).

Host-internal. llama.cpp's `llama_sampler_sample` copies every logit into a candidate array
(262,144 entries for Gemma 3) before the chain's top-k cuts it to k; picking the top k with numpy
first and running the same chain on those gives the same token for the same seed, for less work
per token. Figures in docs/decisions/token-loop.md ("Sampling a token").
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from app.engine.host.speculative import greedy_margin_ok

_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.float32), ("p", np.float32)], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)

# Logits this far below the largest are searched first for the top k (wider searches follow
# when fewer than k lie within it: a full argpartition of a 262,144-logit row takes about 1 ms).
_WINDOW = 12.0
_WINDOWS = (_WINDOW, 2 * _WINDOW, 4 * _WINDOW)
# The next token's search starts this far below the last one's k-th largest logit, and is taken
# when it finds at least k logits and at most _NEAR_MAX (more would cost the partition its time).
_CARRY = 2.0
_NEAR_MAX = 4096
# Greedy picks from a verification batch are trusted only when the token leads the next one by
# more than this: llama.cpp's batched kernels round differently from single-token decoding.
GREEDY_MARGIN = 1.0


def logits_row(llm: Any, idx: int) -> np.ndarray:
    """Row `idx` of the last batch's logits (-1: the last row); a view, valid until the next decode."""
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, idx), shape=(int(llm._n_vocab),))


def sampler_chain(llm: Any, **settings: Any) -> Any:
    """llama-cpp-python's sampler chain for `settings` (top_k, top_p, min_p, temp, the penalties), as
    its `Llama.generate` makes one: the grammar slot's sampler while the slot holds a grammar
    (app/engine/host/grammar_sampler.py). `ChainPick` picks with it."""
    return llm._init_sampler(**settings)


class ChainPick:
    """llama-cpp-python's own sampler (penalties, grammar, the whole chain)."""

    greedy = False

    def __init__(self, sampler: Any) -> None:
        self._sampler = sampler

    def pick(self, llm: Any, idx: int) -> int:
        return int(self._sampler.sample(llm._ctx, idx))

    def sure(self, llm: Any, idx: int, token: int) -> bool:
        return True

    def close(self) -> None:
        pass


class GreedyPick:
    """Temperature 0 without penalties or grammar: the largest logit (the first of equals, as
    llama.cpp's greedy sampler)."""

    greedy = True

    def pick(self, llm: Any, idx: int) -> int:
        return int(logits_row(llm, idx).argmax())

    def sure(self, llm: Any, idx: int, token: int) -> bool:
        return greedy_margin_ok(logits_row(llm, idx), token, GREEDY_MARGIN)

    def close(self) -> None:
        pass


class TopKPick:
    """Top-k, top-p, min-p, temperature and a seeded draw, as llama-cpp-python's chain does them
    with no penalties, on the k largest logits only."""

    greedy = False

    def __init__(self, top_k: int, top_p: float, min_p: float, temp: float, seed: int) -> None:
        self.k = top_k
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        for part in (
            llama_cpp.llama_sampler_init_top_k(top_k),
            llama_cpp.llama_sampler_init_typical(1.0, 1),
            llama_cpp.llama_sampler_init_top_p(top_p, 1),
            llama_cpp.llama_sampler_init_min_p(min_p, 1),
            llama_cpp.llama_sampler_init_temp(temp),
            llama_cpp.llama_sampler_init_dist(seed),
        ):
            llama_cpp.llama_sampler_chain_add(chain, part)
        self._chain = chain
        self._cur = np.empty(top_k, dtype=_TOKEN_DATA)
        self._kth: float | None = None  # the last row's k-th largest logit

    def close(self) -> None:
        if self._chain:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None

    def __del__(self) -> None:
        self.close()

    def top(self, row: np.ndarray) -> np.ndarray:
        """The ids of the k largest logits of `row` (in no particular order). The k largest all lie
        at or above any threshold that at least k logits reach, so the search starts at the
        previous token's k-th largest logit less _CARRY (one pass over the row when the logits
        moved less than that, as they mostly do); otherwise among the logits within _WINDOW of the
        largest, then within twice and four times that, and only then in the whole row."""
        k = self.k
        if self._kth is not None:
            near = np.flatnonzero(row >= self._kth - _CARRY)
            if k <= len(near) <= _NEAR_MAX:
                return self._keep(row, near)
        peak = row.max()
        for width in _WINDOWS:
            near = np.flatnonzero(row >= peak - width)
            if len(near) >= k:
                return self._keep(row, near)
        return self._keep(row, np.argpartition(row, -k)[-k:])

    def _keep(self, row: np.ndarray, near: np.ndarray) -> np.ndarray:
        """The k largest of `near` (at least k ids), noting the k-th largest logit for the next token."""
        k = self.k
        if len(near) > k:
            near = near[np.argpartition(row[near], -k)[-k:]]
        self._kth = float(row[near].min())
        return near

    def pick(self, llm: Any, idx: int) -> int:
        row = logits_row(llm, idx)
        ids = self.top(row)
        return self.draw(ids, row[ids])

    def draw(self, ids: np.ndarray, logits: np.ndarray) -> int:
        """The chain's pick among `ids` (at most k of them) with these logits."""
        cur = self._cur[: len(ids)]
        cur["id"] = ids
        cur["logit"] = logits
        cur["p"] = 0.0
        arr = llama_cpp.llama_token_data_array(cur.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)), len(ids), -1, False)
        llama_cpp.llama_sampler_apply(self._chain, ctypes.byref(arr))
        token = int(cur[arr.selected]["id"])
        llama_cpp.llama_sampler_accept(self._chain, token)
        return token

    def sure(self, llm: Any, idx: int, token: int) -> bool:
        return True


class BiasedPick:
    """Another pick after adding a logit bias (OpenAI's logit_bias) to the row's logits, in place:
    every pick reads its logits from that row, so each sees the biased ones."""

    def __init__(self, inner: ChainPick | GreedyPick | TopKPick, bias: Sequence[Sequence[float]], n_vocab: int) -> None:
        self._inner = inner
        self.greedy = inner.greedy
        pairs = [(int(t), float(b)) for t, b in bias if 0 <= int(t) < n_vocab]  # ids past the vocabulary name nothing
        self._ids = np.array([t for t, _ in pairs], dtype=np.intp)
        self._bias = np.array([b for _, b in pairs], dtype=np.float32)

    def pick(self, llm: Any, idx: int) -> int:
        logits_row(llm, idx)[self._ids] += self._bias
        return self._inner.pick(llm, idx)

    def sure(self, llm: Any, idx: int, token: int) -> bool:
        return self._inner.sure(llm, idx, token)

    def close(self) -> None:
        self._inner.close()


Pick = ChainPick | GreedyPick | TopKPick | BiasedPick


def make_pick(
    llm: Any,
    sampler: Any,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    repeat_penalty: float,
    grammar: bool,
    seed: int,
    penalties: bool = False,
    logit_bias: Sequence[Sequence[float]] = (),
) -> Pick:
    """The cheapest way to pick tokens that gives the chain's own choice for these settings.
    `penalties`: the chain has presence or frequency penalties (only it applies them)."""
    pick = _plain_pick(
        llm,
        sampler,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        chain=grammar or penalties or repeat_penalty != 1.0,
        seed=seed,
    )
    return BiasedPick(pick, logit_bias, int(llm._n_vocab)) if logit_bias else pick


def _plain_pick(
    llm: Any, sampler: Any, *, temperature: float, top_k: int, top_p: float, min_p: float, chain: bool, seed: int
) -> ChainPick | GreedyPick | TopKPick:
    if chain:
        return ChainPick(sampler)
    if temperature <= 0.0:
        return GreedyPick()
    if 0 < top_k < int(llm._n_vocab):
        return TopKPick(top_k, top_p, min_p, temperature, seed)
    return ChainPick(sampler)
