"""A reply with tools in Anthropic's Messages shapes: its content blocks (text, then a tool_use
block for each call) and, for a stream, the events that end it once the reply is read whole
(the text not sent yet, then each call as content_block_start of type tool_use and its input in
input_json_delta pieces). A call that breaks its tool's schema is a tool_use block as written (its
problem is in the record); a reply whose calls did not parse is its raw text as one text block:
never nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from app.tools.reply import ContentGate, ToolReply, argument_pieces

Event = tuple[str, dict[str, Any]]  # (the event's name, its data without "type")


def usable(reply: ToolReply | None) -> bool:
    """Whether `reply` has calls to answer with (else its raw text is the answer)."""
    return reply is not None and bool(reply.calls)


def content_blocks(reply: ToolReply | None, text: str) -> list[dict[str, Any]]:
    """A whole reply's content: the calls' tool_use blocks after the text around them, or the raw
    text alone when there are no calls to answer with."""
    if reply is None or not usable(reply):
        return [{"type": "text", "text": text}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)} for c in reply.calls]
    return blocks


class BlockStream:
    """The content blocks of a stream with tools: the text block is opened only when there is
    text (as a whole reply has a text block only then), the calls follow it."""

    def __init__(self, gate: ContentGate) -> None:
        self.gate = gate
        self.text_open = False

    def text(self, piece: str) -> Iterator[Event]:
        if not piece:
            return
        if not self.text_open:
            self.text_open = True
            yield "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
        yield "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}

    def more(self, reply_so_far: str) -> Iterator[Event]:
        """The text that may go out now (not where a call may begin)."""
        yield from self.text(self.gate.more(reply_so_far))

    def end(self, reply: ToolReply | None, text: str) -> Iterator[Event]:
        """The rest once the reply is read: the text not sent yet, then the calls."""
        calls = reply.calls if reply is not None and usable(reply) else ()
        yield from self.text(self.gate.rest(reply) if reply is not None and calls else text[len(self.gate.sent) :])
        if not self.text_open and not calls:  # a reply of nothing is an empty text block
            yield from (("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),)
            self.text_open = True
        index = 0
        if self.text_open:
            yield "content_block_stop", {"index": 0}
            index = 1
        for call in calls:
            yield (
                "content_block_start",
                {"index": index, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}},
            )
            for piece in argument_pieces(call.arguments):
                yield "content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}
            yield "content_block_stop", {"index": index}
            index += 1
