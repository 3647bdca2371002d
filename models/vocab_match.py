"""Whether two model files share one vocabulary, from their GGUF headers alone: the tokenizer
model, the token count, the special tokens and a hash of the token list. A draft model must
match the model it drafts for exactly, or its token ids would mean other text.

The token list is hashed as the file stores it (type, count, every length-prefixed text), read
with the header's own bounded parser after `read_gguf_header` has validated the whole header.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from models.gguf_validate import InvalidModelFile, _Cursor, _read_value, read_gguf_header

TOKENS_KEY = "tokenizer.ggml.tokens"
_SPECIAL_KEYS = ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class Vocabulary:
    """A model file's vocabulary, as far as matching it needs."""

    tokenizer: str  # tokenizer.ggml.model: "llama", "gpt2", ...
    pre: str  # tokenizer.ggml.pre ("" when the file has none)
    n_tokens: int
    special: tuple[int | None, ...]  # BOS and EOS ids
    digest: str  # sha256 of the token list as stored

    def mismatch(self, other: Vocabulary) -> str | None:
        """What differs from `other`, in a few words; None when they are the same vocabulary."""
        if self.tokenizer != other.tokenizer or self.pre != other.pre:
            return f"a {other.tokenizer or 'unknown'} tokenizer instead of {self.tokenizer or 'unknown'}"
        if self.n_tokens != other.n_tokens:
            return f"{other.n_tokens:,} tokens instead of {self.n_tokens:,}"
        if self.special != other.special:
            return "other start and end tokens"
        if self.digest != other.digest:
            return "other tokens under the same ids"
        return None


def read_vocabulary(path: str | Path) -> Vocabulary:
    """The vocabulary of the GGUF file at `path`. Raises InvalidModelFile (one sentence)."""
    header = read_gguf_header(path)
    meta = header.metadata
    tokens = meta.get(TOKENS_KEY)
    n_tokens = getattr(tokens, "length", None)
    if not isinstance(n_tokens, int):
        raise InvalidModelFile(f"{Path(path).name} has no token list, so no model can draft for it")
    special = tuple(value if isinstance(value := meta.get(key), int) and not isinstance(value, bool) else None for key in _SPECIAL_KEYS)
    model, pre = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.pre")
    return Vocabulary(
        model if isinstance(model, str) else "", pre if isinstance(pre, str) else "", n_tokens, special, _token_list_digest(path)
    )


def same_vocabulary(a: str | Path, b: str | Path) -> str | None:
    """None when the files at `a` and `b` share one vocabulary, else what differs in `b`, in a
    few words ("1,037 tokens instead of 1,035")."""
    return read_vocabulary(a).mismatch(read_vocabulary(b))


def _token_list_digest(path: str | Path) -> str:
    """sha256 of the bytes of the token list entry's value (its type, count and texts)."""
    with open(path, "rb") as f:
        cur = _Cursor(f, os.fstat(f.fileno()).st_size)
        cur.take(4, "the file signature")
        cur.u32("the version")
        cur.u64("the tensor count")
        n_kv = cur.u64("the metadata count")
        for i in range(n_kv):
            key = cur.take(cur.u64(f"the name of metadata entry {i + 1}"), "a metadata name").decode("utf-8", "replace")
            vtype = cur.u32(f"metadata '{key}'")
            start = cur.pos
            _read_value(cur, key, vtype)
            if key == TOKENS_KEY:
                return _digest(f, start, cur.pos)
    raise InvalidModelFile(f"{Path(path).name} has no token list, so no model can draft for it")


def _digest(f: BinaryIO, start: int, end: int) -> str:
    digest = hashlib.sha256()
    f.seek(start)
    left = end - start
    while left > 0:
        chunk = f.read(min(_HASH_CHUNK, left))
        if not chunk:
            raise InvalidModelFile("the file got shorter while its token list was being read")
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest()


def drafts_for(model_path: str | Path, candidates: Iterable[tuple[str, str | Path]]) -> list[str]:
    """The names among `candidates` ((name, file) pairs) whose files share the vocabulary of the
    model at `model_path`: the models that may draft for it (never the model's own file). A
    candidate whose file cannot be read is left out. Raises InvalidModelFile for the model's own."""
    mine = read_vocabulary(model_path)
    own = os.path.realpath(model_path)
    found = []
    for name, path in candidates:
        if os.path.realpath(path) == own:
            continue
        try:
            if mine.mismatch(read_vocabulary(path)) is None:
                found.append(name)
        except InvalidModelFile:
            continue
    return found
