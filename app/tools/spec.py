"""Tool definitions, tool_choice and the tool turns of a conversation, read and checked from an
OpenAI chat request or an Anthropic Messages request into one shape; anything wrong is a
ToolError naming the field (the API answers it with a 400 in its own error shape)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from app.engine.grammar import schema_grammar

MAX_TOOLS = 128
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class ToolError(ValueError):
    """A tool, tool_choice or tool turn the request got wrong; `param` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema of type object

    def openai(self) -> dict[str, Any]:
        """The shape chat templates are given tools in (OpenAI's)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "auto"  # "auto" | "none" | "required" (a call must come; with `name`, that tool's)
    name: str | None = None
    parallel: bool = True  # several calls in one reply allowed


@dataclass(frozen=True)
class ToolSet:
    tools: tuple[Tool, ...]
    choice: ToolChoice

    @property
    def active(self) -> bool:
        """Tools the model is told of and may call (tool_choice "none" leaves them out)."""
        return bool(self.tools) and self.choice.mode != "none"

    def names(self) -> set[str]:
        return {t.name for t in self.tools}

    def record(self) -> dict[str, Any]:
        """What the record keeps of the request's tools."""
        return {
            "tools": [t.openai() for t in self.tools],
            "tool_choice": {"mode": self.choice.mode, "name": self.choice.name, "parallel": self.choice.parallel},
        }


def read_tool(name: object, description: object, schema: object, where: str) -> Tool:
    if not isinstance(name, str) or not name:
        raise ToolError(f"{where}.name: every tool needs a name", where)
    if not _NAME.match(name):
        raise ToolError(f"{where}.name: {name[:80]!r} is not a valid tool name (letters, digits, _ . -, at most 64)", where)
    if description is not None and not isinstance(description, str):
        raise ToolError(f"{where}.description: must be a string", where)
    if schema is None:
        schema = dict(EMPTY_SCHEMA)
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise ToolError(f'{where}: the parameters of tool {name!r} must be a JSON schema of type "object"', where)
    try:
        schema_grammar(schema)
    except ValueError as exc:
        raise ToolError(f"{where}: the parameters of tool {name!r}: {exc}", where) from None
    return Tool(name, description or "", schema)


def _check_count(tools: object, param: str) -> list[Any]:
    if not isinstance(tools, list):
        raise ToolError(f"{param}: must be a list of tools", param)
    if len(tools) > MAX_TOOLS:
        raise ToolError(f"{param}: at most {MAX_TOOLS} tools may be given; there were {len(tools)}", param)
    return tools


def _unique(tools: list[Tool], param: str) -> tuple[Tool, ...]:
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ToolError(f"{param}: two tools are named {tool.name!r}", param)
        seen.add(tool.name)
    return tuple(tools)


def read_openai_tools(body: dict[str, Any]) -> ToolSet | None:
    """`tools`, `tool_choice` and `parallel_tool_calls` of a chat completions request."""
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None or raw == []:
        if choice not in (None, "none", "auto"):
            raise ToolError("tool_choice: there are no tools to choose from", "tool_choice")
        return None
    tools = []
    for i, item in enumerate(_check_count(raw, "tools")):
        where = f"tools[{i}]"
        if not isinstance(item, dict) or item.get("type", "function") != "function" or not isinstance(item.get("function"), dict):
            raise ToolError(f'{where}: must be {{"type": "function", "function": {{"name": ...}}}}', "tools")
        fn = item["function"]
        try:
            tools.append(read_tool(fn.get("name"), fn.get("description"), fn.get("parameters"), f"{where}.function"))
        except ToolError as exc:
            raise ToolError(exc.message, "tools") from None
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise ToolError("parallel_tool_calls: must be true or false", "parallel_tool_calls")
    names = {t.name for t in tools}
    if choice is None or choice in ("auto", "none", "required"):
        mode, name = choice or "auto", None
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        mode, name = "required", choice["function"].get("name")
        if name not in names:
            raise ToolError(f"tool_choice: names the tool {str(name)[:80]!r}, which is not among the tools", "tool_choice")
    else:
        raise ToolError('tool_choice: must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}', "tool_choice")
    return ToolSet(_unique(tools, "tools"), ToolChoice(mode, name, parallel))


def read_anthropic_tools(body: dict[str, Any]) -> ToolSet | None:
    """`tools` and `tool_choice` of a Messages request."""
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None or raw == []:
        if choice is not None and not (isinstance(choice, dict) and choice.get("type") in ("auto", "none")):
            raise ToolError("tool_choice: there are no tools to choose from", "tool_choice")
        return None
    tools = []
    for i, item in enumerate(_check_count(raw, "tools")):
        if not isinstance(item, dict):
            raise ToolError(f"tools.{i}: must be an object with a name and an input_schema", "tools")
        if item.get("type") not in (None, "custom"):
            raise ToolError(
                f"tools.{i}: Anthropic's server tools ({item.get('type')!r}) are not available here; "
                "give client tools (name, description, input_schema)",
                "tools",
            )
        try:
            tools.append(read_tool(item.get("name"), item.get("description"), item.get("input_schema"), f"tools.{i}"))
        except ToolError as exc:
            raise ToolError(exc.message, "tools") from None
    if choice is None:
        choice = {"type": "auto"}
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise ToolError(
            'tool_choice: must be {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": ...} or {"type": "none"}', "tool_choice"
        )
    disable = choice.get("disable_parallel_tool_use", False)
    if not isinstance(disable, bool):
        raise ToolError("tool_choice.disable_parallel_tool_use: must be true or false", "tool_choice")
    kind, name = choice["type"], None
    if kind == "tool":
        name = choice.get("name")
        if name not in {t.name for t in tools}:
            raise ToolError(f"tool_choice.name: names the tool {str(name)[:80]!r}, which is not among the tools", "tool_choice")
    mode = {"auto": "auto", "none": "none", "any": "required", "tool": "required"}[kind]
    return ToolSet(_unique(tools, "tools"), ToolChoice(mode, name, not disable))


def new_call_id(prefix: str = "call_") -> str:
    return prefix + uuid.uuid4().hex[:24]


def arguments_object(text: object, where: str, param: str = "messages") -> dict[str, Any]:
    """A call's arguments as the client sent them back (a JSON text, or an object), as an object."""
    if isinstance(text, dict):
        return text
    if isinstance(text, str):
        try:
            value = json.loads(text) if text.strip() else {}
        except ValueError:
            raise ToolError(f"{where}: the arguments are not valid JSON", param) from None
        if isinstance(value, dict):
            return value
    raise ToolError(f"{where}: the arguments must be a JSON object", param)
