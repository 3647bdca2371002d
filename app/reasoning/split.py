"""A reply split into its reasoning and the rest, whole (`split_reply`) or while it streams
(`Splitter`), by the mode the engine host gave it (app/reasoning/style.py MODES).

- think: `<think>reasoning</think>content`; with "think-open" the reply starts inside the
  reasoning (its prompt opened `<think>`), so only `</think>` appears. Reasoning without its
  `</think>` (a reply cut off) is all reasoning. The reasoning is stripped of the whitespace
  around it and the content of the whitespace before it, as llama.cpp's parser does.
- harmony (gpt-oss): the analysis channel is the reasoning (app/tools/harmony.py reads it); the
  rest is the final channel, or, with `markup` (a reply with tools, whose calls
  app/tools/harmony.py reads), the reply's text unchanged.
- none: no reasoning; the rest is the text.

A stream never lets a partial `<think>` or `</think>` into the content or the reasoning: a tail
that may still become a tag is held until the next text says what it is. What a stream sent,
joined, is what the whole split gives (the last held piece aside, which the whole split settles)."""

from __future__ import annotations

from app.reasoning.style import CLOSE, MODE_HARMONY, MODE_THINK, MODE_THINK_OPEN, OPEN
from app.tools import harmony


def split_reply(mode: str, text: str, *, markup: bool = False) -> tuple[str, str]:
    """(reasoning, rest) of a whole reply written in `mode`."""
    if mode in (MODE_THINK, MODE_THINK_OPEN):
        return _split_think(text, opened=mode == MODE_THINK_OPEN)
    if mode == MODE_HARMONY:
        read = harmony.read(text)
        return read.reasoning, text if markup else read.content
    return "", text


def _split_think(text: str, *, opened: bool) -> tuple[str, str]:
    stripped = text.lstrip()
    if stripped.startswith(OPEN):
        body = stripped[len(OPEN) :]
    elif opened:
        body = text
    else:
        return "", text
    at = body.find(CLOSE)
    if at < 0:
        return body.strip(), ""
    return body[:at].strip(), body[at + len(CLOSE) :].lstrip()


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of `text` may be the start of `tag` still coming."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class Splitter:
    """A reply's text as it streams -> (reasoning, rest) deltas; `reasoning` and `rest` hold what
    was given out. `markup`: as split_reply's."""

    def __init__(self, mode: str, *, markup: bool = False) -> None:
        self.mode, self.markup = mode, markup
        self.reasoning = ""
        self.rest = ""
        self.closed = False  # the reasoning ended (its </think>, or the first text after an analysis message)
        self._state = "open" if mode == MODE_THINK_OPEN else "start" if mode == MODE_THINK else "plain"
        self._pending = ""
        self._raw = ""

    def more(self, text: str) -> tuple[str, str]:
        """The reasoning and the rest that `text`, the reply's next piece, makes known."""
        if self.mode == MODE_HARMONY:
            return self._harmony(text)
        if self._state == "plain":
            return self._give("", text)
        self._pending += text
        reasoning, rest = "", ""
        if self._state in ("start", "open"):
            head = self._pending.lstrip()
            if not head or (OPEN.startswith(head) and len(head) < len(OPEN)):
                return "", ""  # whitespace, or a <think> still coming
            if head.startswith(OPEN):
                self._pending, self._state = head[len(OPEN) :], "reasoning"
            elif self._state == "open":
                self._state = "reasoning"
            else:  # no reasoning: the text as it is
                self._state, self.closed = "plain", True
                whole, self._pending = self._pending, ""
                return self._give("", whole)
        if self._state == "reasoning":
            at = self._pending.find(CLOSE)
            if at >= 0:
                reasoning = self._pending[:at].rstrip()
                self._pending, self._state, self.closed = self._pending[at + len(CLOSE) :], "after", True
            else:
                keep = len(self._pending) - _partial_tag(self._pending, CLOSE)
                reasoning = self._pending[:keep].rstrip()
                self._pending = self._pending[len(reasoning) :]
            if not self.reasoning:
                reasoning = reasoning.lstrip()
        if self._state == "after":
            rest = self._pending if self.rest else self._pending.lstrip()
            self._pending = ""
        return self._give(reasoning, rest)

    def _give(self, reasoning: str, rest: str) -> tuple[str, str]:
        self.reasoning += reasoning
        self.rest += rest
        return reasoning, rest

    def _harmony(self, text: str) -> tuple[str, str]:
        self._raw += text
        read = harmony.read(self._raw, partial=True)
        reasoning = read.reasoning[len(self.reasoning) :] if read.reasoning.startswith(self.reasoning) else ""
        if self.markup:
            rest = text
        else:
            rest = read.content[len(self.rest) :] if read.content.startswith(self.rest) else ""
        if read.content or read.calls:
            self.closed = True
        return self._give(reasoning, rest)
