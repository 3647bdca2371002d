"""An Anthropic Messages request, read and checked: the system prompt, the user and assistant
turns (text blocks only), max_tokens (required there), the sampling settings, stop sequences
and streaming; anything wrong is an ApiError naming the field. Unknown fields are ignored, as
the real API does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.grammar import grammar_for
from app.serve.body_check import check_body
from app.serve.chat_request import MAX_TOKENS_LIMIT
from app.serve.errors import ApiError
from app.settings import SamplingParams

ROLES = ("user", "assistant")
MAX_STOP_SEQUENCES = 16
TOP_K_LIMIT = 1_000_000


@dataclass(frozen=True)
class MessagesRequest:
    model: str
    messages: list[dict[str, str]]  # a system message first when the request had one
    params: SamplingParams
    stop: tuple[str, ...]
    stream: bool
    top_k: int | None  # as given; None: Cove's own
    grammar: str | None = None  # GBNF the reply must match (output_config.format)
    output_format: dict[str, Any] | None = None  # output_config.format as given


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
    of block (image, document, tool_use, tool_result, thinking) is refused by name."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: must be a string or a list of content blocks", param=where.split(".")[0])
    parts = []
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != "text":
            what = f"a block of type {kind!r}" if isinstance(kind, str) else "a block without a type"
            raise ApiError(400, f"{where}.{i}: {what} is not supported here; Cove's models read text blocks only",
                           param=where.split(".")[0])
        text = block.get("text")
        if not isinstance(text, str):
            raise ApiError(400, f"{where}.{i}.text: must be a string", param=where.split(".")[0])
        parts.append(text)
    return "".join(parts)


def _output_format(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(the grammar, the format) of output_config.format (or the older top-level output_format):
    {"type": "json_schema", "schema": {...}}, enforced as OpenAI's response_format json_schema is."""
    config = body.get("output_config")
    if config is not None and not isinstance(config, dict):
        raise ApiError(400, "output_config: must be an object", param="output_config")
    if config and config.get("effort") is not None:
        raise ApiError(400, "output_config.effort: Cove cannot set how much effort a local model puts in; leave it out",
                       param="output_config")
    fmt, where = (config or {}).get("format"), "output_config.format"
    if fmt is None and body.get("output_format") is not None:
        fmt, where = body.get("output_format"), "output_format"
    if fmt is None:
        return None, None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise ApiError(400, f"{where}: must be {{\"type\": \"json_schema\", \"schema\": {{...}}}}", param=where)
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise ApiError(400, f"{where}.schema: must be a JSON schema object", param=where)
    try:
        grammar = grammar_for({"type": "json_schema", "json_schema": {"schema": schema}})
    except ValueError as exc:
        raise ApiError(400, f"{where}: {exc}", param=where) from None
    return grammar, fmt


def read_messages_request(body: object) -> MessagesRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    check_body(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model: Field required (the name of an installed model, GET /v1/models)", param="model")
    max_tokens = _whole(body, "max_tokens", 1, MAX_TOKENS_LIMIT, required=True)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages: must be a non-empty list of user and assistant turns", param="messages")
    messages: list[dict[str, str]] = []
    system = body.get("system")
    if system is not None:
        text = _text(system, "system")
        if text:
            messages.append({"role": "system", "content": text})
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages.{i}.role: must be 'user' or 'assistant' (a system prompt is the "
                                "top-level 'system' field)", param="messages")
        text = _text(message.get("content"), f"messages.{i}.content")
        if messages and messages[-1]["role"] == message["role"]:  # consecutive turns of one role are one turn
            messages[-1]["content"] += "\n\n" + text
        else:
            messages.append({"role": message["role"], "content": text})
    if messages[-1]["role"] == "assistant":
        raise ApiError(400, "messages: the last turn must be the user's; continuing an assistant turn (a prefill) "
                            "is not supported here", param="messages")
    thinking = body.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        raise ApiError(400, "thinking: Cove cannot turn a local model's extended thinking on or give it a budget (a "
                            "model that thinks does so in its reply's text); leave it out or send "
                            "{\"type\": \"disabled\"}", param="thinking")
    tools = body.get("tools")
    if tools:
        raise ApiError(400, "tools: tool use is not supported here", param="tools")
    stop = body.get("stop_sequences")
    if stop is not None and (not isinstance(stop, list) or len(stop) > MAX_STOP_SEQUENCES
                             or not all(isinstance(s, str) and s for s in stop)):
        raise ApiError(400, f"stop_sequences: must be a list of up to {MAX_STOP_SEQUENCES} non-empty strings",
                       param="stop_sequences")
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
    return MessagesRequest(model, messages, params, tuple(dict.fromkeys(stop or ())), stream, top_k, grammar,
                           output_format)
