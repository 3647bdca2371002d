"""Well-formed UTF-8 under a grammar: the tokens that may come next so that the reply's bytes stay
a well-formed UTF-8 text (Unicode's table 3-7: no overlong form, no surrogate, nothing past
U+10FFFF, no stray continuation byte).

Host-internal. llama.cpp's grammar reads a reply's bytes as UTF-8 without checking their form: a
model with byte tokens can write "a" as C1 A1, which the grammar takes as one "a" and a decoder as
two U+FFFD, so a reply held to `maxLength: 1` came back four characters long. The grammar sampler
(app/engine/host/grammar_sampler.py) asks this as well as the grammar about every token it picks.

Most tokens are well-formed text on their own and may come whenever the reply is between
characters; the few others (byte tokens, pieces of a character) are checked byte by byte against
where the reply is.
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np

CLEAN = (0, 0, 0)  # between characters: (continuation bytes still due, range of the next one)


def advance(state: tuple[int, int, int], data: bytes) -> tuple[int, int, int] | None:
    """The state after `data`, or None where `data` breaks UTF-8's form there."""
    need, lo, hi = state
    for byte in data:
        if need:
            if not lo <= byte <= hi:
                return None
            need, lo, hi = need - 1, 0x80, 0xBF
        elif byte < 0x80:
            continue
        elif 0xC2 <= byte <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif byte == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif byte == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif 0xE1 <= byte <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif byte == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= byte <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif byte == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return None
    return (need, lo, hi) if need else CLEAN


def token_texts(vocab: Any, n_vocab: int) -> list[bytes]:
    """Every token's text as the grammar reads it (control tokens shown); about half a second for
    262,144 tokens, so the grammar sampler's indexes share one pass."""
    buf = ctypes.create_string_buffer(1024)
    texts = []
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
        if n < 0:
            big = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(vocab, token, big, -n, 0, True)
            texts.append(big.raw[:n])
        else:
            texts.append(buf.raw[:n])
    return texts


class Utf8Tokens:
    """The vocabulary as UTF-8: which tokens are well-formed text on their own (`whole`) and the
    bytes of the others (`pieces`). Built once per model, from `token_texts`."""

    def __init__(self, texts: list[bytes]) -> None:
        whole = np.zeros(len(texts), dtype=bool)
        pieces: dict[int, bytes] = {}
        for token, text in enumerate(texts):
            if text.isascii() or advance(CLEAN, text) == CLEAN:
                whole[token] = True
            else:
                pieces[token] = text
        self.whole = whole
        self.pieces = pieces
        self.piece_ids = np.array(sorted(pieces), dtype=np.intc)


class Utf8Guard:
    """Where one reply is in its UTF-8, and which tokens may come next."""

    def __init__(self, tokens: Utf8Tokens) -> None:
        self._tokens = tokens
        self._state = CLEAN

    def _after(self, token: int) -> tuple[int, int, int] | None:
        piece = self._tokens.pieces.get(token)
        if piece is None:  # well-formed on its own: only between characters
            return CLEAN if self._state == CLEAN else None
        return advance(self._state, piece)

    def allows(self, token: int) -> bool:
        return self._after(token) is not None

    def accept(self, token: int) -> None:
        self._state = self._after(token) or CLEAN

    def allowed_of(self, ids: np.ndarray) -> np.ndarray:
        """Those of `ids` that keep the reply well-formed."""
        if not len(ids):
            return ids
        if self._state == CLEAN:
            keep = self._tokens.whole[ids]
        else:
            keep = np.zeros(len(ids), dtype=bool)
        for i in np.flatnonzero(~keep & np.isin(ids, self._tokens.piece_ids)):
            keep[i] = self.allows(int(ids[i]))
        return ids[keep]

    def refused_mask(self) -> np.ndarray:
        """Over the whole vocabulary: True for each token that would break the form."""
        refused = ~self._tokens.whole if self._state == CLEAN else np.ones(len(self._tokens.whole), dtype=bool)
        for token in self._tokens.piece_ids:
            if self.allows(int(token)):
                refused[token] = False
        return refused
