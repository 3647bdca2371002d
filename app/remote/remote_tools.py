"""Tools with a model on one of the person's servers: the offer as OpenAI's request fields
(`tools_body`), the calls the server streams back (`ToolCallPieces`: OpenAI's `delta.tool_calls`,
a call's id and name in its first piece and its arguments in pieces after), written at the reply's
end in the markup of CALL_FAMILY, which the turn's tool loop reads as it reads a local model's
calls. So the tools run here, each asked here, whatever the server is; the server only writes the
calls and reads their results in the next request.

And `served_by`: which machine and which model file answered, as another Cove says in its
response headers (app/serve/api/model_listing.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.engine.request import ToolOffer

CALL_FAMILY = "hermes"  # app/tools/families.py: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
MACHINE_HEADER = "cove-machine"
SHA256_HEADER = "cove-model-sha256"
SERVED_BY = ("machine", "sha256")  # what served_by may say, kept in the record's ran_on
_MAX_SAID = 200  # characters kept of what a server says of itself


def tools_body(offer: ToolOffer) -> dict[str, Any]:
    """The request's `tools`, `tool_choice` and `parallel_tool_calls` for `offer`."""
    choice: Any = offer.choice
    if offer.name is not None:
        choice = {"type": "function", "function": {"name": offer.name}}
    return {"tools": [dict(t) for t in offer.tools], "tool_choice": choice, "parallel_tool_calls": offer.parallel}


class ToolCallPieces:
    """The calls of one streamed reply, put together from their pieces by `index`."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, str]] = {}

    def __bool__(self) -> bool:
        return any(call["name"] for call in self._calls.values())

    def add(self, pieces: list[Any]) -> None:
        for position, piece in enumerate(pieces):
            if not isinstance(piece, dict):
                continue
            index = piece.get("index")
            index = index if isinstance(index, int) and not isinstance(index, bool) else position
            call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            if isinstance(piece.get("id"), str) and piece["id"]:
                call["id"] = piece["id"]
            function = piece.get("function")
            if not isinstance(function, dict):
                continue
            if isinstance(function.get("name"), str) and function["name"]:
                call["name"] = function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"] += arguments
            elif isinstance(arguments, dict):  # a server that sends the object whole
                call["arguments"] = json.dumps(arguments, ensure_ascii=False)

    def as_text(self) -> str:
        """The calls in CALL_FAMILY's markup, in index order; arguments that are not a JSON object
        stay the text the server sent, for the tool loop to refuse with its sentence."""
        blocks = []
        for _, call in sorted(self._calls.items()):
            if not call["name"]:
                continue
            try:
                arguments: Any = json.loads(call["arguments"]) if call["arguments"].strip() else {}
            except ValueError:
                arguments = call["arguments"]
            written = json.dumps({"name": call["name"], "arguments": arguments}, ensure_ascii=False)
            blocks.append(f"<tool_call>\n{written}\n</tool_call>")
        return ("\n" if blocks else "") + "\n".join(blocks)


def served_by(headers: Mapping[str, str]) -> dict[str, str]:
    """{"machine", "sha256"} of a reply another Cove served (each only when said, and sane)."""
    found: dict[str, str] = {}
    machine = (headers.get(MACHINE_HEADER) or "").strip()
    if machine and machine.isprintable():
        found["machine"] = machine[:_MAX_SAID]
    sha = (headers.get(SHA256_HEADER) or "").strip().lower()
    if len(sha) == 64 and all(c in "0123456789abcdef" for c in sha):
        found["sha256"] = sha
    return found
