"""What the engine host needs for one reply with tools: the tools, the family the model writes
calls in, and the grammar that keeps them valid (with its trigger when it is lazy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.tools.families import Family
from app.tools.grammar import opening_call_grammar, tool_call_grammar
from app.tools.openings import first_opening
from app.tools.spec import EMPTY_SCHEMA, Tool


@dataclass(frozen=True)
class ToolConstraint:
    """The tools of one reply and the grammar that keeps its calls to them valid."""

    family: Family
    tools: tuple[Tool, ...]
    gbnf: str
    trigger: str | None  # the grammar applies once the reply ends with this; None: from the first token
    # Instead of `trigger` (hermes, generic): where in the reply so far a call's opening begins, or
    # None; the grammar applies from there, given the text from there on first.
    find: Callable[[str], int | None] | None = None


def tools_of(wire: list[dict[str, Any]]) -> tuple[Tool, ...]:
    """Tools in OpenAI's shape (as protocol.Generate carries them) as Tool."""
    out = []
    for item in wire:
        inner = item.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else item
        params = fn.get("parameters")
        out.append(
            Tool(str(fn.get("name") or ""), str(fn.get("description") or ""), params if isinstance(params, dict) else dict(EMPTY_SCHEMA))
        )
    return tuple(out)


def tool_constraint(wire: list[dict[str, Any]], family: Family, *, choice: str, name: str | None, parallel: bool) -> ToolConstraint:
    """Raises ValueError for a schema the grammar converter refuses."""
    tools = tools_of(wire)
    required = choice == "required"
    if not required and family.name in ("hermes", "generic"):
        names = tuple(t.name for t in tools)
        return ToolConstraint(
            family, tools, opening_call_grammar(tools, family, parallel=parallel), None, lambda text: _opening_start(text, names)
        )
    gbnf = tool_call_grammar(tools, family, name=name if required else None, parallel=parallel, after_opener=not required)
    return ToolConstraint(family, tools, gbnf, None if required else family.opener)


def _opening_start(text: str, names: tuple[str, ...]) -> int | None:
    at, opening = first_opening(text, names)
    return at if opening is not None else None


class AfterThinking:
    """A `find` that looks for a call only outside the model's thinking (`<think>...</think>`), as
    llama.cpp's lazy grammar trigger lets a thought come first: a call the model thinks about is not
    a call. `inside`: the reply starts in its thinking (the prompt ended with `<think>`). It keeps
    whether the thought has ended, since the text it is given is only the reply's last bytes."""

    def __init__(self, find: Callable[[str], int | None], inside: bool) -> None:
        self.find = find
        self.inside = inside

    def __call__(self, text: str) -> int | None:
        start = 0
        opened, ended = text.rfind("<think>"), text.rfind("</think>")
        if opened > ended:
            self.inside = True
            return None
        if ended >= 0:
            self.inside = False
            start = ended + len("</think>")
        elif self.inside:
            return None
        at = self.find(text[start:])
        return None if at is None else start + at
