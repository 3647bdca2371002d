"""The token loop of one reply: evaluate the prompt past the reused prefix, then sample a token,
evaluate it, and repeat; with drafting on, verify a run of drafted tokens in one batch instead.

Host-internal. `TokenStream` keeps llama-cpp-python's bookkeeping (`input_ids[:n_tokens]` are
exactly the tokens whose KV cells the context holds) as `Llama.generate` does, so prefix reuse,
the state cache and the transcript work unchanged, whichever way the tokens were evaluated.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import Any

import llama_cpp
import numpy as np


class TokenStream:
    """Iterate for the reply's tokens; close() (or breaking out) leaves the KV cache consistent."""

    def __init__(self, llm: Any, sampler: Any, prompt: list[int], reuse: int, *, drafter: Any = None, policy: Any = None,
                 n_ctx: int) -> None:
        self._llm, self._sampler = llm, sampler
        self._prompt, self._reuse = prompt, reuse
        self._drafter, self._policy = drafter, policy
        self._n_ctx = n_ctx
        self._iter = self._run()

    def __iter__(self) -> Iterator[int]:
        return self._iter

    def close(self) -> None:
        self._iter.close()

    def _start(self) -> None:
        """Cut the KV cache back to the reused prefix and evaluate the rest of the prompt."""
        llm, tokens, reuse = self._llm, self._prompt, self._reuse
        if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.n_tokens = reuse
        else:
            llm.reset()
            reuse = 0
        llm.eval(tokens[reuse:])

    def _run(self) -> Generator[int, None, None]:
        llm, sampler = self._llm, self._sampler
        self._start()
        idx = -1
        while True:
            token = int(sampler.sample(llm._ctx, idx))
            yield token
            drafts = self._drafts(token)
            if not drafts:
                llm.eval([token])
                idx = -1
                if self._policy is not None:
                    self._policy.plain_step_done()
                continue
            token = yield from self._verify(token, drafts)
            # `token` was sampled from the last verified position and is not evaluated yet.
            llm.eval([token])
            idx = -1

    def _drafts(self, last: int) -> list[int]:
        policy, drafter = self._policy, self._drafter
        if policy is None or drafter is None or not policy.drafting:
            return []
        room = self._n_ctx - int(self._llm.n_tokens) - 2
        k = min(policy.draft_length(), room)
        if k <= 0:
            return []
        llm = self._llm
        n = int(llm.n_tokens)
        history = llm.input_ids[:n]
        return drafter.draft(history, last, k)

    def _verify(self, last: int, drafts: list[int]) -> Generator[int, None, int]:
        """Evaluate `last` and the drafts in one batch and yield each sampled token while it
        matches its draft; returns the first token that did not (or the one after the last
        draft), which is not yet evaluated."""
        llm, sampler, policy = self._llm, self._sampler, self._policy
        assert policy is not None
        batch = [last, *drafts]
        n_past = int(llm.n_tokens)
        t0 = time.perf_counter()
        llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
        llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n_past:n_past + len(batch)] = batch
        llm.n_tokens = n_past + len(batch)
        accepted = 0
        kept = 1  # cells of the batch that hold the reply's own tokens: `last`, then accepted drafts
        try:
            for i, draft in enumerate(drafts):
                token = int(sampler.sample(llm._ctx, i))
                if token != draft or not policy.trust(llm, i, token):
                    policy.verified(len(drafts), accepted, time.perf_counter() - t0)
                    return token
                accepted += 1
                kept += 1
                yield token
            token = int(sampler.sample(llm._ctx, len(drafts)))
            policy.verified(len(drafts), accepted, time.perf_counter() - t0)
            return token
        finally:
            # Drop the cells past what was accepted (also when the reply stops here).
            llm.n_tokens = n_past + kept
            llm._ctx.kv_cache_seq_rm(-1, n_past + kept, -1)


def logits_row(llm: Any, i: int) -> np.ndarray:
    """The logits of row `i` of the last batch (a view, valid until the next decode)."""
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, i)
    return np.ctypeslib.as_array(ptr, shape=(int(llm.n_vocab()),))
