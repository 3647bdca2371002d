"""An OpenAI Responses request (POST /v1/responses), read and checked into the same pieces a chat
completions request gives: the messages (from `instructions` and `input`: messages, function
calls and their outputs), the tools in Responses' flat shape, tool_choice, the sampling
settings, text.format and streaming. Cove answers it statelessly: what `store` or
`previous_response_id` would ask it to keep or look up is refused by name. Anything wrong is an
ApiError naming the field; unknown fields are ignored, as the real API does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.grammar import grammar_for
from app.serve.api.chat_request import MAX_TOKENS_LIMIT, read_model, read_sampling
from app.serve.api.image_parts import image_from_url, no_file_store
from app.serve.api.reasoning_request import responses_reasoning
from app.serve.api.schema_keywords import refuse_unenforced, refuse_unenforced_tools
from app.serve.http.errors import ApiError
from app.settings import SamplingParams
from app.tools.spec import MAX_TOOLS, Tool, ToolChoice, ToolError, ToolSet, arguments_object, read_tool

ROLES = ("user", "assistant", "system", "developer")
# The content parts each role's messages may hold (system and developer: input_text only).
KINDS = {"user": ("input_text", "input_image"), "assistant": ("input_text", "output_text", "refusal")}
STATELESS = (
    "Cove serves the Responses API statelessly: it keeps no responses to look up later; send the whole conversation as `input` each time"
)


@dataclass(frozen=True)
class ResponsesRequest:
    model: str
    messages: list[dict[str, Any]]  # chat-shaped: system, user, assistant (with tool_calls), tool
    params: SamplingParams
    stream: bool
    instructions: str | None
    grammar: str | None = None  # GBNF the reply must match (text.format)
    reply_format: dict[str, Any] | None = None  # text.format as given (json_schema / json_object)
    tools: ToolSet | None = None
    echo: dict[str, Any] | None = None  # the settings a Response object repeats back
    reasoning: str = ""  # the reasoning switch (app/serve/api/reasoning_request.py); "": the template's default
    stop: tuple[str, ...] = ()  # the Responses API has no stop strings
    messages_param: str = "input"  # the field a refusal of the messages names


def _refuse_stateful(body: dict[str, Any]) -> None:
    if body.get("store") is True:
        raise ApiError(400, f"'store': true is not supported: {STATELESS}; send \"store\": false or leave it out", param="store")
    for name in ("previous_response_id", "conversation", "prompt"):
        if body.get(name) is not None:
            raise ApiError(400, f"'{name}' is not supported: {STATELESS}", param=name)
    if body.get("background") not in (None, False):
        raise ApiError(400, "'background' is not supported: Cove answers while the request is open (or streams)", param="background")


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """Fields Cove cannot honour, refused by name rather than ignored."""
    include = body.get("include")
    if body.get("top_logprobs") not in (None, 0) or (isinstance(include, list) and "message.output_text.logprobs" in include):
        field = "top_logprobs" if body.get("top_logprobs") not in (None, 0) else "include"
        raise ApiError(400, f"'{field}' asks for token log probabilities, which Cove's server does not return", param=field)
    if body.get("truncation") not in (None, "disabled"):
        raise ApiError(
            400,
            "'truncation' must be \"disabled\": Cove never drops input items to fit the context; a request too large for it is refused",
            param="truncation",
        )


def _text(content: object, where: str, kinds: tuple[str, ...]) -> str:
    """A message's content: a string, or a list of text parts of the given types."""
    read = _content(content, where, kinds)
    assert isinstance(read, str), "only _content's input_image kind makes a list"
    return read


def _content(content: object, where: str, kinds: tuple[str, ...]) -> str | list[dict[str, Any]]:
    """A message's content: a string, or a list of parts of the given types, their text joined.
    With "input_image" among `kinds` (a user message) the list may hold images
    (app/serve/api/image_parts.py): the content is then the list of its parts, text and images in
    order."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: must be a string or a list of content parts", param="input")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in kinds:
            what = f"a part of type {kind!r}" if isinstance(kind, str) else "a part without a type"
            extra = {
                "input_image": " (an image goes in a user message)",
                "input_file": " (Cove reads text and images: no files or audio)",
                "input_audio": " (Cove reads text and images: no files or audio)",
            }.get(kind if isinstance(kind, str) else "", "")
            raise ApiError(
                400, f"{where}[{i}]: {what} is not supported here{extra}; send {' or '.join(repr(k) for k in kinds)} parts", param="input"
            )
        assert isinstance(part, dict)
        if kind == "input_image":
            if part.get("file_id") is not None:
                raise no_file_store(f"{where}[{i}]", "input")
            parts.append(image_from_url(part.get("image_url"), where=f"{where}[{i}]", param="input"))
            continue
        text = part.get("text") if kind != "refusal" else part.get("refusal")
        if not isinstance(text, str):
            raise ApiError(400, f"{where}[{i}].text: must be a string", param="input")
        parts.append({"type": "text", "text": text})
    if any(p["type"] == "image" for p in parts):
        return parts
    return "".join(p["text"] for p in parts)


def _messages(instructions: str | None, raw: object) -> list[dict[str, Any]]:
    """Chat messages from `instructions` and `input`. A run of function_call items is one
    assistant message with tool_calls (joined to the assistant message just before it, as a
    reply with text and calls comes back); each function_call_output a tool message, which must
    answer a call made before it."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(raw, str):
        if not raw:
            raise ApiError(400, "'input' is empty: send the text to answer, or a list of input items", param="input")
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'input' is required: a string, or a non-empty list of input items", param="input")
    calls: dict[str, str] = {}  # call_id -> tool name
    thought = ""  # a reasoning item's text, for the assistant message or call that follows it
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None) if isinstance(item, dict) else None
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                raise ApiError(400, f"{where}.role: must be one of {', '.join(ROLES)}", param="input")
            kinds = KINDS.get(role, ("input_text",))
            content = _content(item.get("content"), f"{where}.content", kinds)
            messages.append({"role": "system" if role == "developer" else role, "content": content})
            if role == "assistant" and thought:
                messages[-1]["reasoning"] = thought
            thought = ""
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise ApiError(400, f"{where}: a function_call needs a call_id, a name and arguments", param="input")
            try:
                arguments = arguments_object(item.get("arguments"), where, "input")
            except ToolError as exc:
                raise ApiError(400, exc.message, param="input") from None
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            calls[call_id] = name
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not thought:
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call], **({"reasoning": thought} if thought else {})})
                thought = ""
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or call_id not in calls:
                raise ApiError(
                    400,
                    f"{where}.call_id: {str(call_id)[:80]!r} answers no function_call item before it "
                    "(Cove keeps no earlier responses: send the call with its output)",
                    param="input",
                )
            output = _text(item.get("output"), f"{where}.output", ("input_text",))
            messages.append({"role": "tool", "tool_call_id": call_id, "name": calls[call_id], "content": output})
        elif kind == "reasoning":  # a reply's reasoning, given back: the template decides whether it is rendered
            thought = _reasoning_text(item, where)
        elif kind == "item_reference":
            raise ApiError(400, f"{where}: an item_reference points at a stored item: {STATELESS}", param="input")
        else:
            what = f"an item of type {kind!r}" if isinstance(kind, str) else "an item without a type or role"
            raise ApiError(
                400,
                f"{where}: {what} is not supported here; send message, reasoning, function_call and function_call_output items",
                param="input",
            )
    if not any(m["role"] != "system" for m in messages):
        raise ApiError(400, "'input' has no user message to answer", param="input")
    return messages


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    """A reasoning item's text: its reasoning_text parts (as Cove sends them), else its summary."""
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
            raise ApiError(400, f"{where}.{key}: must be a list of {kind} parts", param="input")
        text = "".join(p["text"] for p in parts if p.get("type") == kind)
        if text:
            return text
    return ""


def _tools(body: dict[str, Any]) -> ToolSet | None:
    """Function tools in Responses' flat shape ({"type": "function", "name", "description",
    "parameters"}), tool_choice and parallel_tool_calls."""
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None or raw == []:
        if choice not in (None, "none", "auto"):
            raise ToolError("tool_choice: there are no tools to choose from", "tool_choice")
        return None
    if not isinstance(raw, list):
        raise ToolError("tools: must be a list of tools", "tools")
    if len(raw) > MAX_TOOLS:
        raise ToolError(f"tools: at most {MAX_TOOLS} tools may be given; there were {len(raw)}", "tools")
    tools: list[Tool] = []
    for i, item in enumerate(raw):
        where = f"tools[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict) or kind != "function":
            what = f"tools of type {kind!r} (hosted tools) are" if isinstance(kind, str) else "a tool without a type is"
            raise ToolError(
                f'{where}: {what} not available here; give function tools ({{"type": "function", "name": ..., "parameters": {{...}}}})',
                "tools",
            )
        try:
            tool = read_tool(item.get("name"), item.get("description"), item.get("parameters"), where)
        except ToolError as exc:
            raise ToolError(exc.message, "tools") from None
        if tool.name in {t.name for t in tools}:
            raise ToolError(f"tools: two tools are named {tool.name!r}", "tools")
        tools.append(tool)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise ToolError("parallel_tool_calls: must be true or false", "parallel_tool_calls")
    if choice is None or choice in ("auto", "none", "required"):
        mode, name = choice or "auto", None
    elif isinstance(choice, dict) and choice.get("type") == "function":
        mode, name = "required", choice.get("name")
        if name not in {t.name for t in tools}:
            raise ToolError(f"tool_choice: names the tool {str(name)[:80]!r}, which is not among the tools", "tool_choice")
    else:
        raise ToolError('tool_choice: must be "auto", "none", "required" or {"type": "function", "name": ...}', "tool_choice")
    return ToolSet(tuple(tools), ToolChoice(mode, name, parallel))


def _text_format(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(the grammar, the format) of text.format: {"type": "text"}, {"type": "json_object"} or
    {"type": "json_schema", "name", "schema", "strict"}, enforced as chat's response_format is."""
    text = body.get("text")
    if text is None:
        return None, None
    if not isinstance(text, dict):
        raise ApiError(400, '\'text\' must be an object such as {"format": {"type": "json_schema", ...}}', param="text")
    fmt = text.get("format")
    if fmt is None or fmt == {"type": "text"}:
        return None, None
    if not isinstance(fmt, dict):
        raise ApiError(400, 'text.format: must be an object with a "type"', param="text.format")
    if fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise ApiError(400, "text.format.schema: a json_schema format needs a JSON schema object", param="text.format")
        refuse_unenforced(fmt["schema"], "text.format.schema", "text.format")
        response_format: object = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name"), "schema": fmt["schema"], "strict": fmt.get("strict")},
        }
    else:
        response_format = fmt
    try:
        grammar = grammar_for(response_format)
    except ValueError as exc:
        message = str(exc).replace("response_format.json_schema", "text.format").replace("response_format", "text.format")
        raise ApiError(400, message, param="text.format") from None
    return grammar, fmt


def read_responses_request(body: object) -> ResponsesRequest:
    body, model = read_model(body)
    _refuse_stateful(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ApiError(400, "'instructions' must be a string", param="instructions")
    try:
        tools = _tools(body)
    except ToolError as exc:
        raise ApiError(400, exc.message, param=exc.param) from None
    messages = _messages(instructions, body.get("input"))
    _refuse_unsupported(body)
    refuse_unenforced_tools(body.get("tools"))
    limit = body.get("max_output_tokens")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOKENS_LIMIT):
        raise ApiError(400, f"'max_output_tokens' must be a whole number from 1 to {MAX_TOKENS_LIMIT}", param="max_output_tokens")
    grammar, text_format = _text_format(body)
    if tools is not None and tools.active and grammar is not None:
        raise ApiError(
            400,
            "'text.format' and 'tools' cannot be used together: a reply is either the tools' calls or the format's JSON",
            param="text.format",
        )
    sampling = read_sampling({name: body[name] for name in ("temperature", "top_p", "stream") if name in body} | {"max_tokens": limit})
    echo = {
        "instructions": instructions,
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "max_output_tokens": limit,
        "text": {"format": text_format or {"type": "text"}},
        "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
    }
    return ResponsesRequest(
        model, messages, sampling.params, sampling.stream, instructions, grammar, text_format, tools, echo, responses_reasoning(body)
    )
