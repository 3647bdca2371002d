"""Text to token ids with llama.cpp's own tokenizer, for the chat session (session.py) and the
embedding context (embeddings.py).

Runs only in the engine host (it imports llama_cpp).
"""

from __future__ import annotations

from typing import Any

import llama_cpp
import numpy as np


class TokenizeError(RuntimeError):
    """llama.cpp would not tokenize a text; the message is one readable sentence."""


def tokenize(vocab: Any, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
    """`text` as token ids of `vocab`. `add_special`: BOS (and a BERT-like vocabulary's [SEP]) as
    the model's settings say; `parse_special`: control tokens written in the text are read as
    those tokens rather than as text.

    Llama.tokenize tokenizes a text longer than n_ctx_train tokens twice (its first buffer is
    that size); this buffer starts at the byte count plus a margin (BPE and SentencePiece make
    at most one token per byte) and grows once, to the size llama.cpp asks for, for a
    tokenizer that makes more. Raises TokenizeError if it still does not fit."""
    data = text.encode("utf-8", "surrogatepass")
    size = len(data) + 8
    for _ in range(2):
        buf = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, add_special, parse_special)
        if n >= 0:
            return np.ctypeslib.as_array(buf)[:n].tolist()  # type: ignore[no-any-return]
        size = -n
    raise TokenizeError(f"llama.cpp could not tokenize a text of {len(data)} bytes")
