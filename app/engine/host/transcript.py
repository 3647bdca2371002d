"""The token-level transcript behind prefix reuse: which tokens the host evaluated for which text.

Invariant (host-internal, but it is what makes follow-up turns cheap): `Transcript.tokens`
are exactly the tokens the model saw (prompt tokens plus the reply tokens it generated),
and `Transcript.text` is the prompt text they stand for. A follow-up prompt whose text
starts with `text` is sent as `tokens + tokenize(rest)`, so generated text is never
re-tokenized (BPE could split it differently and miss the KV cache).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# The conversation id of the transcript of a request that names no conversation (an API
# request: clients resend the whole conversation each time). It is kept in memory only, with
# the live KV cells, and reused only by a later request that names no conversation either and
# whose prompt text starts with its text: an agent's next step after a reply with tool calls.
STATELESS = ""


@dataclass(frozen=True)
class Transcript:
    conversation_id: str
    text: str
    tokens: tuple[int, ...]


def plan_prompt(
    prev: Transcript | None,
    conversation_id: str | None,
    text: str,
    full_tokens: Sequence[int],
    tokenize_rest: Callable[[str], list[int]],
) -> tuple[list[int], bool]:
    """(prompt tokens, whether the transcript was reused) for the rendered prompt `text`.

    `full_tokens` is `text` tokenized in one piece. The rest after the transcript's text is
    tokenized alone and accepted only if it tokenizes the same way at the end of the full
    prompt (no merge across the boundary, no SentencePiece space prefix), else the full
    tokenization is used and llama.cpp still reuses whatever prefix matches.
    """
    if (
        prev is None
        or prev.conversation_id != (STATELESS if conversation_id is None else conversation_id)
        or not prev.text
        or not text.startswith(prev.text)
    ):
        return list(full_tokens), False
    rest = text[len(prev.text) :]
    rest_tokens = tokenize_rest(rest) if rest else []
    n = len(rest_tokens)
    if n and (n > len(full_tokens) or list(full_tokens[-n:]) != rest_tokens):
        return list(full_tokens), False
    return list(prev.tokens) + rest_tokens, True


def common_prefix(evaluated: np.ndarray, tokens: Sequence[int]) -> int:
    """Length of the common prefix of the tokens in the KV cache and a new prompt (vectorized)."""
    n = min(len(evaluated), len(tokens))
    if n == 0:
        return 0
    diff = np.flatnonzero(evaluated[:n] != np.asarray(tokens[:n], dtype=evaluated.dtype))
    return int(diff[0]) if diff.size else n


def kept_reply(boundaries: Sequence[tuple[int, int]], cut: int) -> tuple[int, int]:
    """(tokens, characters) of the reply that can join the transcript.

    `boundaries` lists (tokens so far, characters so far) after each reply token that ended
    on a whole character, in order. `cut` is the length of the reply text actually kept
    (a stop string and anything after it are not). The result is the last boundary at or
    before the cut, so the kept tokens stand for exactly the kept characters.
    """
    i = bisect_right([c for _, c in boundaries], cut)
    return boundaries[i - 1] if i else (0, 0)
