"""Token ids to text as they stream: incremental UTF-8 decoding and stop-string hold-back.

Both are O(1) per token (apart from the length of the stop strings): each token's bytes
are looked up once and fed to `codecs`' incremental decoder, so a character split across
byte tokens appears when its last byte arrives (why the host does not use llama-cpp-python's
streaming: docs/decisions/token-loop.md, "Detokenizing a stream").
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence


class IncrementalDetokenizer:
    """Feeds one token at a time; returns the text that became complete with it.

    `piece` maps a token id to its bytes (for llama.cpp: `llama_token_to_piece` with
    special=False, so control tokens map to b"" and are never shown).
    """

    __slots__ = ("_decoder", "_piece", "chars", "pending")

    def __init__(self, piece: Callable[[int], bytes]) -> None:
        self._piece = piece
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.chars = 0  # characters produced so far
        self.pending = False  # True while a multi-byte character is incomplete

    def feed(self, token: int) -> str:
        return self.feed_bytes(self._piece(token))

    def feed_bytes(self, data: bytes) -> str:
        text = self._decoder.decode(data)
        self.chars += len(text)
        self.pending = bool(self._decoder.getstate()[0])
        return text


class StopMatcher:
    """Finds stop strings in streamed text without ever emitting one.

    `push(text)` returns (text safe to show now, stopped). While the end of the stream could
    be the start of a stop string, that tail is held back; `flush()` releases it when the
    stream ends for another reason. The emitted text is always a prefix of the stream.
    """

    __slots__ = ("_held", "_max", "_stops", "matched")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in dict.fromkeys(stops) if s)
        self._max = max((len(s) for s in self._stops), default=0)
        self._held = ""
        self.matched: str | None = None  # the stop string that ended the stream, once one did

    def push(self, text: str) -> tuple[str, bool]:
        if not self._stops:
            return text, False
        buf = self._held + text
        cut = -1
        for s in self._stops:
            i = buf.find(s)
            if i != -1 and (cut == -1 or i < cut):
                cut, self.matched = i, s
        if cut != -1:
            self._held = ""
            return buf[:cut], True
        keep = self._tail_len(buf)
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _tail_len(self, buf: str) -> int:
        """Length of the longest suffix of `buf` that is a proper prefix of a stop string."""
        for k in range(min(len(buf), self._max - 1), 0, -1):
            tail = buf[-k:]
            for s in self._stops:
                if s.startswith(tail):
                    return k
        return 0
