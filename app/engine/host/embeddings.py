"""Pooled, L2-normalised text embeddings from the loaded model, computed in the engine host on a
llama.cpp context of their own (created on first use, next to the chat context, on the same weights).

Why a second context rather than llama_set_embeddings() on the chat one: the chat context's
sequences hold the conversations of its slots, so embedding there would overwrite KV cells the
next reply reuses; its pooling type is fixed when it is created; and a non-causal model (BERT-like)
needs each text in one micro-batch, which the chat context's n_ubatch does not promise. The
second context shares the weights (no copy); its own KV cache and compute buffer are sized to the
texts asked for (at least 512 tokens, grown when a longer batch comes, never past the chat
context's size or the model's training context), and the chat context is never touched.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from app.engine.host.vocab_tokenize import TokenizeError, tokenize

MIN_CTX = 512
MAX_SEQS = 32  # texts per decode


class EmbedError(Exception):
    """The texts could not be embedded; the message is one readable sentence."""


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


class Embedder:
    """The embedding context of one loaded model. Used on the host's main thread only."""

    def __init__(
        self, model: Any, vocab: Any, *, name: str, n_embd: int, limit: int, n_threads: int, offload_kqv: bool, encoder_only: bool
    ) -> None:
        self._model, self._vocab, self._name = model, vocab, name
        self.n_embd, self.limit = n_embd, limit  # the most tokens of one text
        self._n_threads, self._offload_kqv, self._encoder_only = n_threads, offload_kqv, encoder_only
        self._ctx: Any = None
        self.n_ctx = 0

    @classmethod
    def for_model(cls, llm: Any, vocab: Any, name: str, limit: int, n_threads: int) -> Embedder:
        """The embedder of a loaded llama_cpp.Llama (its KV cache placed like the chat context's)."""
        model = llm.model
        encoder_only = bool(llama_cpp.llama_model_has_encoder(model)) and not llama_cpp.llama_model_has_decoder(model)
        return cls(
            model,
            vocab,
            name=name,
            n_embd=int(llama_cpp.llama_model_n_embd_out(model)),
            limit=limit,
            n_threads=n_threads,
            offload_kqv=bool(llm.context_params.offload_kqv),
            encoder_only=encoder_only,
        )

    def close(self) -> None:
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx, self.n_ctx = None, 0

    def _tokenize(self, text: str) -> list[int]:
        # BOS (and a BERT-like vocabulary's [SEP]) as the model's own settings say; control
        # tokens written in the text stay text.
        try:
            return tokenize(self._vocab, text, add_special=True, parse_special=False)
        except TokenizeError as exc:
            raise EmbedError(str(exc)) from None

    def _context(self, need: int) -> Any:
        """The embedding context, made (or remade larger) to hold `need` tokens in one batch."""
        if self._ctx is not None and self.n_ctx >= need:
            return self._ctx
        self.close()
        size = min(self.limit, max(MIN_CTX, _round_up(need, MIN_CTX)))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = size
        params.n_seq_max = MAX_SEQS
        params.kv_unified = True  # n_ctx is the total over the sequences of a batch
        params.embeddings = True
        params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED  # the model's own
        params.n_threads = params.n_threads_batch = self._n_threads
        params.offload_kqv = self._offload_kqv
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            raise EmbedError(f"llama.cpp could not set up a {size}-token embedding context for {self._name} (perhaps not enough memory)")
        self._ctx, self.n_ctx = ctx, int(llama_cpp.llama_n_ctx(ctx))
        return ctx

    def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """(one unit vector per text, tokens read). Raises EmbedError with a sentence."""
        if not texts:
            raise EmbedError("there is no text to embed")
        tokenized = [self._tokenize(t) for t in texts]
        for i, toks in enumerate(tokenized):
            if not toks:
                raise EmbedError(f"text {i + 1} is empty; there is nothing to embed")
            if len(toks) > self.limit:
                raise EmbedError(f"text {i + 1} is {len(toks)} tokens; {self._name} embeds at most {self.limit} at a time")
        ctx = self._context(max(len(t) for t in tokenized))
        vectors: list[list[float]] = []
        group: list[list[int]] = []
        for toks in tokenized:
            if group and (sum(map(len, group)) + len(toks) > self.n_ctx or len(group) >= MAX_SEQS):
                vectors += self._run(ctx, group)
                group = []
            group.append(toks)
        vectors += self._run(ctx, group)
        return vectors, sum(map(len, tokenized))

    def _run(self, ctx: Any, group: list[list[int]]) -> list[list[float]]:
        """One decode of a few texts, one sequence each; their pooled vectors, normalised."""
        total = sum(map(len, group))
        batch = llama_cpp.llama_batch_init(total, 0, 1)
        try:
            k = 0
            for seq, toks in enumerate(group):
                for pos, token in enumerate(toks):
                    batch.token[k], batch.pos[k], batch.n_seq_id[k] = token, pos, 1
                    batch.seq_id[k][0] = seq
                    batch.logits[k] = True
                    k += 1
            batch.n_tokens = total
            run = llama_cpp.llama_encode if self._encoder_only else llama_cpp.llama_decode
            rc = run(ctx, batch)
            if rc != 0:
                raise EmbedError(f"llama.cpp could not embed the texts (error {rc})")
            out: list[list[float]] = []
            for seq in range(len(group)):
                ptr = llama_cpp.llama_get_embeddings_seq(ctx, seq)
                if not ptr:
                    raise EmbedError(f"llama.cpp gave no pooled embedding for {self._name}")
                vec = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.n_embd,))
                vec = vec.astype(np.float64)
                norm = float(np.linalg.norm(vec))
                out.append((vec / norm if norm > 0 else vec).tolist())
            return out
        finally:
            llama_cpp.llama_batch_free(batch)
            mem = llama_cpp.llama_get_memory(ctx)
            if mem:  # a non-causal model may have no KV cache at all
                llama_cpp.llama_memory_clear(mem, True)
