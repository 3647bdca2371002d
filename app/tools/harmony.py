"""gpt-oss's replies (OpenAI Harmony): messages, each a header, `<|message|>` and a body that ends
at `<|end|>`, `<|call|>` or `<|return|>`; a later message starts with `<|start|>assistant`. The
header names the channel (`<|channel|>analysis|commentary|final`) and, for a tool call, the
recipient (`to=functions.NAME`), written either after the channel or after the role:

    <|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>commentary to=functions.f
        <|constrain|>json<|message|>{...}<|call|>   (one line: the call after the analysis)
    <|start|>assistant to=functions.f<|channel|>commentary json<|message|>{...}<|call|>
    <|channel|>final<|message|>The answer<|return|>

The final channel (and commentary without a recipient, a preamble) is content; the analysis
channel is reasoning, read apart (`HarmonyReply.reasoning`, app/reasoning/split.py). A message to
another recipient (a built-in tool such as `python`) is left out too, as llama.cpp does. `<|end|>`
is a control token a reply's text may lack (app/engine/host/session.py shows it for this family's tool
replies), so a body also ends where `<|start|>` begins the next message."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MESSAGE, START = "<|message|>", "<|start|>"
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_MARK = "<|"
_CHANNEL = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_HEADER = re.compile(r"<\|start\|>|<\|channel\|>| to=")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class HarmonyReply:
    content: str
    calls: tuple[tuple[str, str], ...]  # (name, arguments: a JSON object as text)
    failed: bool  # a call to a function whose arguments did not parse
    reasoning: str = ""  # the analysis channel's text, its messages joined by a blank line


def partial_mark(text: str) -> int:
    """Where a special token's text that may still be coming begins at the end of `text`
    (`<`, `<|`, `<|cha`, ...), or len(text)."""
    at = text.rfind("<", max(0, len(text) - 12))
    if at >= 0 and re.fullmatch(r"<(\|[a-z]*\|?)?", text[at:]):
        return at
    return len(text)


def _body_end(text: str, begin: int) -> tuple[int, int]:
    """Where the body from `begin` ends and where the next message's header begins."""
    best, after = len(text), len(text)
    for end in _ENDS:
        at = text.find(end, begin)
        if 0 <= at < best:
            best, after = at, at + len(end)
    at = text.find(START, begin)
    if 0 <= at < best:
        best, after = at, at
    return best, after


def read(text: str, *, partial: bool = False) -> HarmonyReply:
    """The calls and the content of a reply. `partial`: the reply so far (a stream): a trailing
    special token's text that may still be coming is not content, and a body not yet ended counts."""
    content: list[str] = []
    thoughts: list[str] = []
    calls: list[tuple[str, str]] = []
    failed = False
    pos = 0
    while pos < len(text):
        marker = text.find(MESSAGE, pos)
        if marker < 0:
            rest = text[pos:]
            if _MARK not in rest and " to=" not in rest:  # free text after (or without) any message
                content.append(rest[: partial_mark(rest)] if partial else rest)
            break
        header = text[pos:marker]
        first = _HEADER.search(header)
        if first is not None and first.start() > 0:  # free text before a header
            content.append(header[: first.start()])
        channels = _CHANNEL.findall(header)
        channel = channels[-1] if channels else ""
        recipient = next((r for r in _RECIPIENT.findall(header) if r != "assistant"), None)
        begin = marker + len(MESSAGE)
        end, after = _body_end(text, begin)
        if recipient is not None and recipient.startswith("functions."):
            skip = len(text[begin:]) - len(text[begin:].lstrip())
            try:
                args, stop = _DECODER.raw_decode(text, begin + skip)
            except ValueError:
                args, stop = None, begin
            if isinstance(args, dict):
                end, after = _body_end(text, stop)
                if not text[stop:end].strip():
                    calls.append((recipient.removeprefix("functions."), json.dumps(args, ensure_ascii=False)))
                    pos = after
                    continue
            if not partial:
                failed = True
        elif recipient is None and channel in ("final", "commentary", ""):
            body = text[begin:end]
            if partial and end == len(text):
                body = body[: partial_mark(body)]
            content.append(body)
        elif recipient is None and channel == "analysis":
            body = text[begin:end]
            if partial and end == len(text):
                body = body[: partial_mark(body)]
            thoughts.append(body)
        pos = after
    return HarmonyReply(
        "".join(content).strip() if not partial else "".join(content).lstrip(),
        tuple(calls),
        failed,
        "\n\n".join(t.strip() for t in thoughts if t.strip()),
    )


def call_start(text: str) -> int:
    """Where the header of the first call to a function begins (its `<|start|>`, or its
    `<|channel|>` after free text), or len(text)."""
    at = text.find(" to=functions.")
    if at < 0:
        return len(text)
    begin = max([text.rfind(START, 0, at)] + [text.rfind(e, 0, at) + len(e) for e in _ENDS if text.rfind(e, 0, at) >= 0] + [0])
    if text.startswith(START, begin):
        return begin
    channel = text.find("<|channel|>", begin, at)
    return channel if channel >= 0 else at
