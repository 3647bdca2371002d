"""The token loop of one reply: evaluate the prompt past the reused prefix, then pick a token,
evaluate it, and repeat; while drafting pays, evaluate the token with a run of drafted tokens in
one batch and keep each drafted token the loaded model itself picks.

Host-internal. `TokenStream` keeps llama-cpp-python's bookkeeping (`input_ids[:n_tokens]` are
exactly the tokens whose KV cells the context holds) as `Llama.generate` does, so prefix reuse,
the state cache and the transcript work unchanged, whichever way the tokens were evaluated.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import Any

import llama_cpp

from app.engine.host.speculative import MAX_DRAFT, Drafter, DraftPolicy
from app.engine.host.token_pick import Pick


class OneToken:
    """A batch of one token kept for the reply's plain steps: Llama.eval rebuilds its batch and
    clears the cache's tail on every call, which a step that appends one token does not need."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self._batch = llama_cpp.llama_batch_init(1, 0, 1)
        b = self._batch
        b.n_tokens = 1
        b.n_seq_id[0] = 1
        b.seq_id[0][0] = 0
        b.logits[0] = True

    def eval(self, token: int) -> None:
        llm, b = self._llm, self._batch
        pos = int(llm.n_tokens)
        b.token[0] = token
        b.pos[0] = pos
        code = llama_cpp.llama_decode(llm.ctx, b)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")
        llm.input_ids[pos] = token
        llm.n_tokens = pos + 1

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None


class TokenStream:
    """Iterate for the reply's tokens; close() (or breaking out) leaves the KV cache consistent."""

    def __init__(self, llm: Any, pick: Pick, prompt: list[int], reuse: int, *,
                 n_ctx: int, drafter: Drafter | None = None, policy: DraftPolicy | None = None) -> None:
        self._llm, self._pick = llm, pick
        self._prompt, self._reuse = prompt, reuse
        self._drafter = drafter
        self._policy = policy if drafter is not None else None
        self._n_ctx = n_ctx
        self._one = OneToken(llm)
        self._iter = self._run()

    def __iter__(self) -> Iterator[int]:
        return self._iter

    def close(self) -> None:
        self._iter.close()
        self._pick.close()
        self._one.close()

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
        llm, pick, policy, one = self._llm, self._pick, self._policy, self._one
        self._start()
        token = pick.pick(llm, -1)
        while True:
            yield token
            t0 = time.perf_counter()
            drafts = self._drafts(token)
            if drafts:
                token = yield from self._verify(token, drafts, t0)
                continue
            t0 = time.perf_counter()
            one.eval(token)
            token = pick.pick(llm, -1)
            if policy is not None:
                policy.plain_step(time.perf_counter() - t0)

    def _drafts(self, last: int) -> list[int]:
        policy, drafter, llm = self._policy, self._drafter, self._llm
        if policy is None or drafter is None or policy.costs.step_s is None:
            return []  # (until one plain step has been timed, nothing says whether drafting pays)
        n = int(llm.n_tokens)
        room = self._n_ctx - n - 2
        if drafter.cheap:  # what the draft rests on decides how much of it to use
            drafts = drafter.draft(llm.input_ids[:n], last, min(MAX_DRAFT, room))
            return drafts[: policy.draft_length(drafter.kind)] if drafts else []
        k = min(policy.draft_length(drafter.kind), room)
        return drafter.draft(llm.input_ids[:n], last, k) if k > 0 else []

    def _verify(self, last: int, drafts: list[int], t0: float) -> Generator[int, None, int]:
        """Evaluate `last` and the drafts in one batch and yield each picked token while it is its
        draft; returns the next token, not yet evaluated. `t0`: when drafting began (a draft
        model's work counts in the step's cost)."""
        llm, pick, policy = self._llm, self._pick, self._policy
        assert policy is not None and self._drafter is not None
        kind = self._drafter.kind
        batch = [last, *drafts]
        n_past = int(llm.n_tokens)
        llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
        llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n_past:n_past + len(batch)] = batch
        kept = 1  # the batch's cells that hold the reply's own tokens (`last`, then accepted drafts)
        accepted = 0
        try:
            for i in range(len(batch)):
                token = pick.pick(llm, i)
                if not pick.sure(llm, i, token):
                    # Too close to call from batched logits: evaluate batch[i] on its own, as
                    # plain decoding would, and pick from that.
                    kept = i
                    break
                if i == len(drafts) or token != drafts[i]:
                    kept = i + 1
                    policy.verified(len(drafts), min(i + 1, len(drafts)), accepted, accepted + 1, time.perf_counter() - t0, kind)
                    return token
                accepted += 1
                kept = i + 2
                yield token
        finally:
            # Drop the cells past what was kept (also when the reply stops here).
            llm.n_tokens = n_past + kept
            llm._ctx.kv_cache_seq_rm(-1, n_past + kept, -1)
        self._one.eval(batch[kept])
        token = pick.pick(llm, -1)
        # The draft at `kept` could not be ruled on: for the policy it was not accepted.
        policy.verified(len(drafts), min(accepted + 1, len(drafts)), accepted, accepted + 1, time.perf_counter() - t0,
                        kind)
        return token
