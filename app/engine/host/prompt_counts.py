"""Choosing a turn's prompt inside the engine host: the context policy run against the
model's own template and tokenizer, with the model's memo of earlier counts (`TokenCounts`)
and a lower bound on a prompt's tokens that needs no rendering (`min_prompt_tokens`).

Host-internal; one memo per ModelSession (so per model), never shared. With both, a turn
too large to fit (a huge paste) is rendered and tokenized at most once per model.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp

from app.context_policy import fit_messages
from app.engine.host.templates import ChatFormat, Rendered


def messages_digest(messages: Sequence[dict[str, Any]], format_source: str) -> bytes:
    """A digest of the roles and texts of `messages` as rendered by `format_source`."""
    h = hashlib.sha256(format_source.encode("utf-8", "surrogatepass"))
    for m in messages:
        role = str(m.get("role") or "user").encode("utf-8", "surrogatepass")
        content = m.get("content")
        text = (content if isinstance(content, str) else "").encode("utf-8", "surrogatepass")
        # Lengths first, so no two different lists can produce the same byte stream.
        h.update(b"%d:%d:" % (len(role), len(text)))
        h.update(role)
        h.update(text)
    return h.digest()


class TokenCounts:
    """Least-recently-used memo: digest -> token count of the rendered, tokenized prompt.
    The digest covers what the chat format sees of each message (role and text) and which
    format rendered it, so a count is reused only for a list that renders the same text."""

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._counts: OrderedDict[bytes, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: bytes) -> int | None:
        n = self._counts.get(key)
        if n is not None:
            self._counts.move_to_end(key)
        return n

    def put(self, key: bytes, n: int) -> None:
        self._counts[key] = n
        self._counts.move_to_end(key)
        while len(self._counts) > self._capacity:
            self._counts.popitem(last=False)


class LongestToken:
    """The most input bytes one token of a vocabulary stands for; computed on first use (it
    reads every token's piece). None for WordPiece and Unigram vocabularies, which normalize
    text (a token may stand for more input than its piece); SentencePiece and byte-level BPE
    in llama.cpp cover every input byte with a token, whitespace apart."""

    def __init__(self, vocab: Any, n_vocab: int) -> None:
        self._vocab, self._n_vocab = vocab, n_vocab
        self._value: int | None = None
        self._known = False

    def __call__(self) -> int | None:
        if not self._known:
            self._value, self._known = self._scan(), True
        return self._value

    def _scan(self) -> int | None:
        if llama_cpp.llama_vocab_type(self._vocab) not in (llama_cpp.LLAMA_VOCAB_TYPE_SPM, llama_cpp.LLAMA_VOCAB_TYPE_BPE):
            return None
        size = 256
        buf = ctypes.create_string_buffer(size)
        longest = 4  # an unknown character becomes one <unk> token: up to 4 bytes of UTF-8
        piece = llama_cpp.llama_token_to_piece
        for token in range(self._n_vocab):
            # special=True: a control token written in the text is parsed as that token.
            n = piece(self._vocab, token, buf, size, 0, True)
            longest = max(longest, -n if n < 0 else n)  # n < 0: the piece needs -n bytes
        return longest


_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.isspace() accepts below 128


def non_space_bytes(text: str) -> int:
    """UTF-8 bytes of `text` without its whitespace (as str.split() sees whitespace)."""
    if text.isascii():  # the common case, in C: a few ms for megabytes
        return len(text.encode("ascii").translate(None, _ASCII_SPACE))
    return len("".join(text.split()).encode("utf-8", "surrogatepass"))


def min_prompt_tokens(messages: Sequence[dict[str, Any]], longest_token: int) -> int:
    """At least this many tokens in any prompt that contains `messages`.

    The prompt holds the non-whitespace bytes of every user and system text (a chat format
    may trim whitespace; replies are left out, since templates may cut earlier replies,
    e.g. their reasoning), and each token stands for at most `longest_token` bytes of it
    (true of tokenizers that cover every input byte with some token: see LongestToken).
    """
    size = 0
    for m in messages:
        content = m.get("content")
        if m.get("role") in ("user", "system") and isinstance(content, str):
            size += non_space_bytes(content)
    return -(-size // longest_token)


@dataclass(frozen=True)
class FittedPrompt:
    rendered: Rendered
    tokens: list[int]  # `rendered.text` tokenized in one piece
    dropped_turns: int


def fit_prompt(
    messages: Sequence[dict[str, Any]],
    chat_format: ChatFormat,
    tokenize_prompt: Callable[[str], list[int]],
    counts: TokenCounts,
    longest_token: Callable[[], int | None],
    n_ctx: int,
    reserve: int,
) -> FittedPrompt:
    """The newest turns that fit, rendered and tokenized. Raises ContextOverflow.

    Every list the policy counts is rendered and tokenized here and the kept one is used
    exactly as it was counted, so the kept prompt is rendered and tokenized once.
    """
    budget = n_ctx - reserve
    seen: dict[bytes, tuple[Rendered, list[int]]] = {}

    def count(msgs: list[dict[str, Any]]) -> int:
        source = chat_format.source
        key = messages_digest(msgs, source)
        rendered = chat_format.render(msgs)
        tokens = tokenize_prompt(rendered.text)
        seen[key] = (rendered, tokens)
        if rendered.source == source:  # not a one-off fallback render
            counts.put(key, len(tokens))
        return len(tokens)

    def known(msgs: list[dict[str, Any]]) -> int | None:
        return counts.get(messages_digest(msgs, chat_format.source))

    def at_least(msgs: list[dict[str, Any]]) -> int:
        # Text of no more characters than the budget cannot have a bound above it (a
        # character is at most 4 bytes, a token stands for at least 4): skip the scan.
        if sum(len(m["content"]) for m in msgs if isinstance(m.get("content"), str)) <= budget:
            return 0
        longest = longest_token()
        return 0 if longest is None else min_prompt_tokens(msgs, longest)

    fit = fit_messages(messages, count, n_ctx, reserve, known_tokens=known, min_tokens=at_least)
    kept = seen.get(messages_digest(fit.messages, chat_format.source))
    if kept is None:  # the model's template was given up on while the policy was counting
        rendered = chat_format.render(fit.messages)
        kept = (rendered, tokenize_prompt(rendered.text))
    return FittedPrompt(kept[0], kept[1], fit.dropped_turns)
