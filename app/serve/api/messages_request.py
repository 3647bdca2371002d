"""An Anthropic Messages request, read and checked: the system prompt, the user and assistant
turns (text blocks, an assistant's tool_use blocks, a user's image and tool_result blocks), the tools and
tool_choice, max_tokens (required there), the sampling settings, stop sequences and streaming;
anything wrong is an ApiError naming the field. Unknown fields are ignored, as the real API does.
The turns come out in the shape chat templates take (OpenAI's): a tool_use is a tool call with
its input as an object, a tool_result a "tool" message answering it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.grammar import grammar_for
from app.serve.api.chat_request import MAX_TOKENS_LIMIT, read_model
from app.serve.api.image_parts import image_from_base64, image_from_url, no_file_store
from app.serve.api.reasoning_request import anthropic_reasoning
from app.serve.api.schema_keywords import refuse_unenforced, refuse_unenforced_tools
from app.serve.http.errors import ApiError
from app.settings import SamplingParams
from app.tools.spec import ToolError, ToolSet, read_anthropic_tools

ROLES = ("user", "assistant")
MAX_STOP_SEQUENCES = 16
TOP_K_LIMIT = 1_000_000


@dataclass(frozen=True)
class MessagesRequest:
    model: str
    messages: list[dict[str, Any]]  # a system message first when the request had one
    params: SamplingParams
    stop: tuple[str, ...]
    stream: bool
    top_k: int | None  # as given; None: Cove's own
    grammar: str | None = None  # GBNF the reply must match (output_config.format)
    reply_format: dict[str, Any] | None = None  # output_config.format as given
    tools: ToolSet | None = None  # tools and tool_choice
    reasoning: str = ""  # the reasoning switch from `thinking` (app/serve/api/reasoning_request.py)
    messages_param: str = "messages"  # the field a refusal of the messages names


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{name}: must be a number, not {type(value).__name__}", param=name)
    if not low <= value <= high:
        raise ApiError(400, f"{name}: must be between {low:g} and {high:g}; it was {value:g}", param=name)
    return float(value)


def _whole(body: dict[str, Any], name: str, low: int, high: int, *, required: bool = False) -> int | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"{name}: Field required (a whole number from {low} to {high:,})", param=name)
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, f"{name}: must be a whole number from {low} to {high:,}", param=name)
    return value


def _text(content: object, where: str) -> str:
    """A turn's or the system prompt's text: a string, or a list of text blocks. Any other kind
    of block (image, document, tool_use, tool_result) is refused by name."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: must be a string or a list of content blocks", param=where.split(".")[0])
    return "".join(_block_text(block, f"{where}.{i}", where.split(".")[0]) for i, block in enumerate(content))


def _block_text(block: object, where: str, param: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind != "text" or not isinstance(block, dict):
        what = f"a block of type {kind!r}" if isinstance(kind, str) else "a block without a type"
        raise ApiError(
            400,
            f"{where}: {what} is not supported here; Cove reads text blocks, and tool_use "
            "blocks in an assistant turn, image and tool_result blocks in a user turn",
            param=param,
        )
    text = block.get("text")
    if not isinstance(text, str):
        raise ApiError(400, f"{where}.text: must be a string", param=param)
    return text


def _output_format(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(the grammar, the format) of output_config.format (or the older top-level output_format):
    {"type": "json_schema", "schema": {...}}, enforced as OpenAI's response_format json_schema is."""
    config = body.get("output_config")
    if config is not None and not isinstance(config, dict):
        raise ApiError(400, "output_config: must be an object", param="output_config")
    if config and config.get("effort") is not None:
        raise ApiError(
            400, "output_config.effort: Cove cannot set how much effort a local model puts in; leave it out", param="output_config"
        )
    fmt, where = (config or {}).get("format"), "output_config.format"
    if fmt is None and body.get("output_format") is not None:
        fmt, where = body.get("output_format"), "output_format"
    if fmt is None:
        return None, None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise ApiError(400, f'{where}: must be {{"type": "json_schema", "schema": {{...}}}}', param=where)
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise ApiError(400, f"{where}.schema: must be a JSON schema object", param=where)
    refuse_unenforced(schema, f"{where}.schema", where)
    try:
        grammar = grammar_for({"type": "json_schema", "json_schema": {"schema": schema}})
    except ValueError as exc:
        raise ApiError(400, f"{where}: {exc}", param=where) from None
    return grammar, fmt


def read_messages_request(body: object) -> MessagesRequest:
    body, model = read_model(body, missing="model: Field required (the name of an installed model, GET /v1/models)")
    max_tokens = _whole(body, "max_tokens", 1, MAX_TOKENS_LIMIT, required=True)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages: must be a non-empty list of user and assistant turns", param="messages")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = _text(system, "system")
        if text:
            messages.append({"role": "system", "content": text})
    try:
        tools = read_anthropic_tools(body)
        messages += _turns(raw)
    except ToolError as exc:
        raise ApiError(400, exc.message, param=exc.param) from None
    refuse_unenforced_tools(body.get("tools"))
    if messages[-1]["role"] == "assistant":
        raise ApiError(
            400,
            "messages: the last turn must be the user's; continuing an assistant turn (a prefill) is not supported here",
            param="messages",
        )
    reasoning = anthropic_reasoning(body)
    stop = body.get("stop_sequences")
    if stop is not None and (
        not isinstance(stop, list) or len(stop) > MAX_STOP_SEQUENCES or not all(isinstance(s, str) and s for s in stop)
    ):
        raise ApiError(400, f"stop_sequences: must be a list of up to {MAX_STOP_SEQUENCES} non-empty strings", param="stop_sequences")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream: must be true or false", param="stream")
    temperature = _number(body, "temperature", 0.0, 1.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    top_k = _whole(body, "top_k", 0, TOP_K_LIMIT)
    defaults = SamplingParams()
    params = SamplingParams(
        temperature=defaults.temperature if temperature is None else temperature,
        top_p=defaults.top_p if top_p is None else top_p,
        top_k=defaults.top_k if top_k is None else top_k,
        max_tokens=max_tokens,
    )
    grammar, output_format = _output_format(body)
    if output_format is not None and tools is not None and tools.active:
        raise ApiError(
            400,
            "output_config.format: cannot be used with tools: a reply is either the tools' calls or the format's JSON",
            param="output_config",
        )
    return MessagesRequest(
        model, messages, params, tuple(dict.fromkeys(stop or ())), stream, top_k, grammar, output_format, tools, reasoning
    )


def _turns(raw: list[Any]) -> list[dict[str, Any]]:
    """The user and assistant turns as chat messages: consecutive turns of one role joined, a
    user's image blocks as image parts (the turn's content then a list of parts), an
    assistant's tool_use blocks as its tool_calls, a user's tool_result blocks as "tool" messages
    (before the turn's text), each answering a tool_use of an earlier assistant turn."""
    out: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # tool_use id -> tool name
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(
                400, f"messages.{i}.role: must be 'user' or 'assistant' (a system prompt is the top-level 'system' field)", param="messages"
            )
        role, content, where = message["role"], message.get("content"), f"messages.{i}.content"
        blocks = content if isinstance(content, list) else None
        parts: list[dict[str, Any]] = []  # text and image parts, in order
        thoughts: list[str] = []  # an assistant turn's thinking blocks, given back
        tool_calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for j, block in enumerate(blocks if blocks is not None else []):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use" and role == "assistant":
                tool_calls.append(_tool_use(block, f"{where}.{j}", calls))
            elif kind == "tool_result" and role == "user":
                results.append(_tool_result(block, f"{where}.{j}", calls))
            elif kind in ("thinking", "redacted_thinking") and role == "assistant":
                thinking = block.get("thinking") if isinstance(block, dict) else None
                if isinstance(thinking, str) and thinking:  # redacted thinking is not Cove's to read
                    thoughts.append(thinking)
            elif kind == "image" and role == "user" and isinstance(block, dict):
                parts.append(_image(block, f"{where}.{j}"))
            else:
                parts.append({"type": "text", "text": _block_text(block, f"{where}.{j}", "messages")})
        text = _joined(parts) if blocks is not None else _text(content, where)
        out += results
        if results and not text:
            continue
        last = out[-1] if out else None
        if last is not None and last["role"] == role:  # consecutive turns of one role are one turn
            if last["content"] and text:
                last["content"] = _joined([*_parts(last["content"]), {"type": "text", "text": "\n\n"}, *_parts(text)])
            else:
                last["content"] = last["content"] or text
            if tool_calls:
                last["tool_calls"] = [*last.get("tool_calls", []), *tool_calls]
            if thoughts:
                last["reasoning"] = "\n\n".join([*filter(None, [last.get("reasoning")]), *thoughts])
        else:
            out.append(
                {
                    "role": role,
                    "content": text,
                    **({"tool_calls": tool_calls} if tool_calls else {}),
                    **({"reasoning": "\n\n".join(thoughts)} if thoughts else {}),
                }
            )
    return out


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An image block's ImagePart dict (app/serve/api/image_parts.py): a base64 source; a url
    source is read as a link (never fetched: only a data: URI is taken), a file source refused."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if not isinstance(source, dict) or kind not in ("base64", "url", "file"):
        raise ApiError(400, f'{where}.source: must be {{"type": "base64", "media_type": "image/png", "data": "..."}}', param="messages")
    if kind == "file":
        raise no_file_store(where, "messages", send='as a base64 source ({"type": "base64", "media_type", "data"})')
    if kind == "url":
        return image_from_url(source.get("url"), where=where, param="messages")
    return image_from_base64(source.get("data"), source.get("media_type"), where=where, param="messages")


def _parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's content as a list of parts."""
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _joined(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A turn's content: its text parts joined, or, with an image among them, the parts as they
    are (text and images in order)."""
    if any(p["type"] == "image" for p in parts):
        return [p for p in parts if p["type"] == "image" or p["text"]]
    return "".join(p["text"] for p in parts)


def _tool_use(block: dict[str, Any], where: str, calls: dict[str, str]) -> dict[str, Any]:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise ToolError(f"{where}: a tool_use block needs an id and a name", "messages")
    if not isinstance(arguments, dict):
        raise ToolError(f"{where}.input: must be an object", "messages")
    calls[call_id] = name
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_result(block: dict[str, Any], where: str, calls: dict[str, str]) -> dict[str, Any]:
    """A tool_result as a "tool" message: its content a string or a list of text blocks;
    `is_error` said in the text, as the model reads it."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or call_id not in calls:
        raise ToolError(
            f"{where}.tool_use_id: a 'tool_result' block answers the tool_use {str(call_id)[:80]!r}, which no earlier assistant turn has",
            "messages",
        )
    content = block.get("content")
    text = "" if content is None else _text(content, f"{where}.content")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise ToolError(f"{where}.is_error: must be true or false", "messages")
    if is_error:
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": calls[call_id]}
