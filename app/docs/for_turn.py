"""The documents of one turn, ready for the turn's thread: the conversation's collections, how to
search them there (each search opens its own connection to the index, on the thread that runs it)
and the share of the model's context the passages may take."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from app.docs.embedding import Embedder
from app.docs.index_db import DocumentIndex
from app.docs.search import search
from app.docs.turn_sources import PASSAGES_PER_TURN, TurnDocuments, docs_budget_chars
from app.docs.types import Passage
from app.settings import SamplingParams
from models.context_size import UNKNOWN_TRAIN_CTX, cove_context


def turn_documents(
    index_path: Path,
    names: Sequence[str],
    *,
    context_length: int | None,
    params: SamplingParams,
    embedder: Callable[[], Embedder | None] | None = None,
    limit: int = PASSAGES_PER_TURN,
) -> TurnDocuments:
    """A TurnDocuments for `names`. `context_length`: the model's training context (None: a server's
    model, whose context Cove does not know: the smallest usual one is assumed). `embedder`: how to
    get the embedder that searches by meaning too (called on the turn's thread), or None for keywords only."""
    n_ctx = cove_context(params.n_ctx, context_length) if context_length else (params.n_ctx or UNKNOWN_TRAIN_CTX)
    wanted = list(dict.fromkeys(names))

    def find(query: str) -> list[Passage]:
        index = DocumentIndex(index_path)
        try:
            return search(index, wanted, query, limit=limit, embedder=embedder() if embedder is not None else None)
        finally:
            index.close()

    return TurnDocuments(names=wanted, search=find, budget_chars=docs_budget_chars(n_ctx, params.max_tokens), limit=limit)
