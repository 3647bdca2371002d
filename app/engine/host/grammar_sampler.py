"""Sampling under a grammar as llama.cpp's own common sampler does it: a token is picked from the
unconstrained candidates, the grammar checks only that token, and only when it refuses is the
grammar applied to candidates and the pick made again among those it allows.

Host-internal. llama-cpp-python puts the grammar inside the chain, where it is applied to every
token of the vocabulary on every step (262,144 candidates for Gemma 3); most steps the first
choice is allowed, so checking one candidate is enough.

The first pick costs what a plain reply's pick costs (app/engine/host/token_pick.py): where the
settings let plain decoding pick by argmax or among the top k only (no penalties), so does the
first pick here. A refused token is picked again among the k best candidates the grammar allows,
found without applying the grammar to the whole vocabulary (`FirstBytes`): the grammar is first
asked which bytes a token may start with (one single-byte token each), then applied to the best
SLICE candidates that start with one of those, and to all of them only when the slice holds fewer
than k it allows. Other settings run llama-cpp-python's whole chain on every candidate. Either way
the token is the one the grammar inside the chain would give for the same random draw.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from app.engine.host.token_pick import TopKPick
from app.engine.host.utf8_guard import Utf8Guard, Utf8Tokens, token_texts

_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.float32), ("p", np.float32)], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)

# A refused token is picked again among the candidates the grammar allows in the SLICE best (by
# logit) of those whose first byte it allows, or in all of those when the slice holds too few.
SLICE = 512
# The reply's last bytes `find` looks at: a call's opening (fence, wrapper, space, a tool's name) fits.
_FIND_WINDOW = 512
# Outside quoted literals and character classes, "<" opens a token reference (<[id]>, <name>): the
# grammar then matches tokens by id, not by their text, and FirstBytes does not apply.
_QUOTED = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]')


def matches_text_only(gbnf: str) -> bool:
    """Whether the grammar matches tokens by their text alone (no token references)."""
    return "<" not in _QUOTED.sub("", gbnf)


class FirstBytes:
    """The vocabulary by the first byte of each token's text, as the grammar reads it (control
    tokens shown): a grammar that refuses a one-byte token refuses every token starting with
    that byte (it refuses at that byte), so asking it about one token per byte rules out most of
    the vocabulary at once. The same holds for a token's first two bytes (`narrow`): where a
    grammar allows few tokens (a number's digits after a space), asking about the two-byte tokens
    rules out most of what starts with an allowed byte. Built once per model, from the texts of
    `token_texts` (app/engine/host/utf8_guard.py)."""

    def __init__(self, vocab: Any, texts: list[bytes]) -> None:
        n_vocab = len(texts)
        first = np.full(n_vocab, -1, dtype=np.int16)  # -1: never allowed (no text) or end of generation
        pair = np.full(n_vocab, -1, dtype=np.int32)  # first byte * 256 + second; -1: one byte or none
        single = np.full(256, -1, dtype=np.intc)  # a token whose text is that byte alone
        double = np.full(65536, -1, dtype=np.intc)  # a token whose text is those two bytes alone
        eog: list[int] = []
        is_eog = llama_cpp.llama_vocab_is_eog
        for token, text in enumerate(texts):
            if is_eog(vocab, token):
                eog.append(token)
                continue
            n, head = len(text), text[:2]
            lead = head[0] if head else 0
            if lead:  # the grammar refuses an empty text or one starting with NUL
                first[token] = lead
                if n == 1 and single[lead] < 0:
                    single[lead] = token
                if n >= 2:
                    pair[token] = lead * 256 + head[1]
                    if n == 2 and double[pair[token]] < 0:
                        double[pair[token]] = token
        self.first = first
        self.pair = pair
        self.eog = np.array(eog, dtype=np.intc)
        self.probes = single[single >= 0]
        self.unprobed = np.flatnonzero((single < 0) & (np.bincount(first[first >= 0], minlength=256) > 0))
        self.pair_keys = np.flatnonzero(double >= 0).astype(np.int32)
        self.pair_probes = double[self.pair_keys]

    def candidates(self, allowed_bytes: np.ndarray) -> np.ndarray:
        """The tokens whose first byte is in `allowed_bytes` (a mask over 256 bytes; bytes no
        one-byte token could be asked about count as allowed), with the end-of-generation ones."""
        mask = allowed_bytes.copy()
        mask[self.unprobed] = True
        lead = self.first
        keep = np.flatnonzero(mask[np.maximum(lead, 0)] & (lead >= 0)).astype(np.intc)
        return np.concatenate([keep, self.eog]) if len(self.eog) else keep

    def narrow(self, candidates: np.ndarray, allowed_bytes: np.ndarray, allowed_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """`candidates` less the tokens whose first two bytes the grammar refuses: it is asked
        (`allowed_of`) about the two-byte tokens whose first byte it allows; a token whose first
        two bytes no two-byte token has is kept."""
        asked = self.pair_keys[allowed_bytes[self.pair_keys >> 8]]
        if not len(asked):
            return candidates
        refused = np.zeros(65536, dtype=bool)
        refused[asked] = True
        refused[self.pair[allowed_of(self.pair_probes[np.searchsorted(self.pair_keys, asked)])]] = False
        key = self.pair[candidates]
        return candidates[(key < 0) | ~refused[np.maximum(key, 0)]]


class Greedy:
    """The first pick at temperature 0: the largest logit (the first of equals, as llama.cpp's
    greedy sampler)."""

    k = 1

    def close(self) -> None:
        pass


FastPick = TopKPick | Greedy


def fast_pick(settings: dict[str, Any], n_vocab: int, seed: int) -> FastPick | None:
    """The cheap first pick that gives the chain's own choice for llama-cpp-python's
    `_init_sampler` settings, or None where only the whole chain does (penalties, mirostat,
    typical sampling, top-k off)."""
    if (
        settings.get("repeat_penalty", 1.0) != 1.0
        or settings.get("presence_penalty")
        or settings.get("frequency_penalty")
        or settings.get("mirostat_mode")
        or settings.get("typical_p", 1.0) != 1.0
        or settings.get("logits_processor") is not None
        or settings.get("grammar") is not None
    ):
        return None
    temp = float(settings.get("temp", 0.8))
    if temp == 0.0:
        return Greedy()
    top_k = int(settings.get("top_k", 40))
    if temp < 0.0 or not 0 < top_k < n_vocab:
        return None
    return TopKPick(top_k, float(settings.get("top_p", 0.95)), float(settings.get("min_p", 0.05)), temp, seed)


class GrammarFirstSampler:
    """Stands in for llama-cpp-python's LlamaSampler in Llama.sample(): only `sample(ctx, idx)`.

    With a `trigger` (a lazy grammar, for tool calls), tokens are picked freely until the reply's
    text ends with the trigger (whitespace after it aside); from the next token on the grammar,
    whose root starts after the trigger, applies. With `find` instead, the grammar's root starts
    where `find` says a call begins in the reply so far: it is switched on there and given that
    text first (tokenized again by `tokenize`), as llama.cpp's lazy grammar is given its trigger's
    match; when that text does not fit it, the grammar waits for the next call as before. `piece`
    gives a token's text with control tokens shown (a trigger may be one). `fast`: the first pick (fast_pick), or None for the
    whole chain on every candidate. `first_bytes`: the model's FirstBytes (made on first use),
    or None to apply the grammar to the whole vocabulary when a refused token is picked again.
    `utf8`: the model's Utf8Tokens (made on first use): while the grammar applies, a token must
    also keep the reply well-formed UTF-8 (app/engine/host/utf8_guard.py); None: the grammar alone."""

    def __init__(
        self,
        chain: Any,
        vocab: Any,
        gbnf: str,
        n_vocab: int,
        trigger: bytes | None = None,
        piece: Callable[[int], bytes] | None = None,
        fast: FastPick | None = None,
        first_bytes: Callable[[], FirstBytes] | None = None,
        find: Callable[[str], int | None] | None = None,
        tokenize: Callable[[bytes], list[int]] | None = None,
        utf8: Callable[[], Utf8Tokens] | None = None,
    ) -> None:
        self._chain = chain  # a _internals.LlamaSampler without the grammar; owns its C chain
        self._fast = fast
        self._first_bytes = first_bytes if matches_text_only(gbnf) else None
        self._utf8 = Utf8Guard(utf8()) if utf8 is not None else None
        self._waiting = trigger if trigger and piece is not None else None
        self._find = find if find is not None and tokenize is not None and piece is not None else None
        self._tokenize = tokenize
        self._piece = piece
        self._seen = b""
        self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self._n_vocab = n_vocab
        self._cur = np.empty(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self._one = llama_cpp.llama_token_data()
        self._one_array = llama_cpp.llama_token_data_array(ctypes.pointer(self._one), 1, -1, False)
        self.refused = 0  # first picks the grammar refused
        self.checked = 0  # candidates the grammar was applied to when picking again

    def close(self) -> None:
        if self._grammar:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None
        if self._fast is not None:
            self._fast.close()
            self._fast = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()

    def _row(self, ctx: Any, idx: int) -> np.ndarray:
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, idx), shape=(self._n_vocab,))

    def _array(self, ids: np.ndarray, logits: np.ndarray | float) -> llama_cpp.llama_token_data_array:
        n = len(ids)
        cur = self._cur[:n]
        cur["id"] = ids
        cur["logit"] = logits
        cur["p"] = 0.0
        data = cur.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
        return llama_cpp.llama_token_data_array(data, n, -1, False)

    def _allowed(self, token: int) -> bool:
        one, arr = self._one, self._one_array
        one.id, one.logit, one.p = token, 1.0, 0.0  # type: ignore[assignment]
        arr.size, arr.selected, arr.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        return not math.isinf(one.logit) and (self._utf8 is None or self._utf8.allows(token))

    def allowed_of(self, ids: np.ndarray) -> np.ndarray:
        """Those of `ids` the grammar allows, in its present state."""
        arr = self._array(ids, 0.0)
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        self.checked += len(ids)
        cur = self._cur[: len(ids)]
        return cur["id"][np.isfinite(cur["logit"])]

    def accept_in_grammar(self, token: int) -> None:
        """Move the grammar past `token`, as a pick does (the chain is left as it is)."""
        llama_cpp.llama_sampler_accept(self._grammar, token)
        if self._utf8 is not None:
            self._utf8.accept(token)

    def usable_of(self, ids: np.ndarray) -> np.ndarray:
        """Those of `ids` the grammar allows and that keep the reply well-formed UTF-8."""
        allowed = self.allowed_of(ids)
        return allowed if self._utf8 is None else self._utf8.allowed_of(allowed)

    @property
    def waiting(self) -> bool:
        """The grammar is lazy and not switched on yet."""
        return self._waiting is not None or self._find is not None

    def watch(self, token: int) -> None:
        """Take a token picked while the grammar waits: keep the reply's last text and switch the
        grammar on once it ends with the trigger (or, with `find`, once a call begins in it)."""
        assert self._piece is not None
        if self._find is not None:
            self._seen = (self._seen + self._piece(token))[-_FIND_WINDOW:]
            self._found()
            return
        assert self._waiting is not None
        self._seen = (self._seen + self._piece(token))[-4 * len(self._waiting) - 64 :]
        if self._seen.rstrip().endswith(self._waiting):
            self._waiting = None

    def _found(self) -> None:
        """Switch the grammar on at a call's start, given the text from there, when `find` sees one."""
        assert self._find is not None and self._tokenize is not None
        text = self._seen.decode("utf-8", "replace")
        at = self._find(text)
        if at is None:
            return
        for token in self._tokenize(text[at:].encode("utf-8")):
            if not self._allowed(token):  # not a call the grammar knows after all: wait for the next one
                llama_cpp.llama_sampler_reset(self._grammar)
                self._seen = b""
                return
            self.accept_in_grammar(token)
        self._find = None

    def sample(self, ctx: Any, idx: int) -> int:
        if self._fast is not None:
            token = self._sample_fast(ctx.ctx, idx, self._fast)
            if token is not None:
                return token
        chain = self._chain.sampler
        row = self._row(ctx.ctx, idx)
        arr = self._array(self._ids, row)
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(arr))
        token = int(self._cur[arr.selected]["id"])
        if self.waiting:  # a lazy grammar not yet switched on: the chain's own choice
            llama_cpp.llama_sampler_accept(chain, token)
            self.watch(token)
            return token
        if not self._allowed(token):
            self.refused += 1
            self.checked += self._n_vocab
            arr = self._array(self._ids, row)  # the chain reordered and cut the array: start again
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
            if self._utf8 is not None:  # the array is still in token order
                self._cur["logit"][self._utf8.refused_mask()] = -math.inf
            llama_cpp.llama_sampler_apply(chain, ctypes.byref(arr))
            token = int(self._cur[arr.selected]["id"])
        self.accept_in_grammar(token)
        llama_cpp.llama_sampler_accept(chain, token)
        return token

    def _sample_fast(self, ctx: Any, idx: int, fast: FastPick) -> int | None:
        """The token by the fast pick, checked by the grammar; None when the grammar allows no
        token at all (the whole chain then decides, as it would have)."""
        row = self._row(ctx, idx)
        if isinstance(fast, TopKPick):
            ids = fast.top(row)
            token = fast.draw(ids, row[ids])
        else:
            token = int(row.argmax())
        if self.waiting:
            self.watch(token)
            return token
        if not self._allowed(token):
            self.refused += 1
            allowed = self.best_allowed(row, fast.k)
            if not len(allowed):
                return None
            if isinstance(fast, TopKPick):
                token = fast.draw(allowed, row[allowed])
            else:
                allowed.sort()  # equal logits: the lowest id, as argmax over the whole row
                token = int(allowed[int(row[allowed].argmax())])
        self.accept_in_grammar(token)
        return token

    def best_allowed(self, row: np.ndarray, k: int) -> np.ndarray:
        """The k tokens of largest logit that the grammar allows and that keep the reply
        well-formed (all of them when fewer)."""
        if self._first_bytes is None:
            candidates = self._ids
        else:
            index = self._first_bytes()
            lead = np.zeros(256, dtype=bool)
            lead[index.first[self.allowed_of(index.probes)]] = True
            candidates = index.candidates(lead)
        allowed = None
        if len(candidates) > SLICE:  # the best of them first: enough when it holds k allowed ones
            allowed = self.usable_of(candidates[np.argpartition(row[candidates], -SLICE)[-SLICE:]])
        if allowed is None or len(allowed) < k:
            if self._first_bytes is not None and len(candidates) > SLICE:
                lead[index.unprobed] = True
                candidates = index.narrow(candidates, lead, self.allowed_of)
            allowed = self.usable_of(candidates)
        if len(allowed) > k:
            allowed = allowed[np.argpartition(row[allowed], -k)[-k:]]
        return np.array(allowed, dtype=np.intc)


class GrammarSlot:
    """The grammar of the reply about to start; Llama.generate() makes its sampler through
    _init_sampler, which install() wraps to sample grammar-first when the slot holds one."""

    def __init__(self) -> None:
        self.gbnf: str | None = None
        self.trigger: bytes | None = None  # a lazy grammar's trigger (None: the grammar applies from the start)
        self.find: Callable[[str], int | None] | None = None  # or where a call begins (GrammarFirstSampler)
        self.tokenize: Callable[[bytes], list[int]] | None = None  # text to tokens, for `find`'s text
        self.piece: Callable[[int], bytes] | None = None  # a token's text, control tokens shown
        self.fast = True  # the first pick as plain decoding makes it, where the settings allow
        self._indexes: tuple[FirstBytes, Utf8Tokens] | None = None

    @classmethod
    def install(cls, llm: Any, vocab: Any) -> GrammarSlot:
        slot = cls()
        n_vocab = int(llm.n_vocab())
        make: Callable[..., Any] = llm._init_sampler

        def indexes() -> tuple[FirstBytes, Utf8Tokens]:
            """Both of the model's indexes, from one pass over its vocabulary when a grammar is first used."""
            if slot._indexes is None:
                texts = token_texts(vocab, n_vocab)
                slot._indexes = FirstBytes(vocab, texts), Utf8Tokens(texts)
            return slot._indexes

        def first_bytes() -> FirstBytes:
            return indexes()[0]

        def utf8() -> Utf8Tokens:
            return indexes()[1]

        def init_sampler(**kwargs: Any) -> Any:
            chain = make(**kwargs)
            if slot.gbnf is None:
                return chain
            fast = fast_pick(kwargs, n_vocab, int(llm._seed)) if slot.fast else None
            return GrammarFirstSampler(
                chain,
                vocab,
                slot.gbnf,
                n_vocab,
                slot.trigger,
                slot.piece,
                fast,
                first_bytes if slot.fast else None,
                slot.find,
                slot.tokenize,
                utf8,
            )

        llm._init_sampler = init_sampler
        return slot
