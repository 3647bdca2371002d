"""An OpenAI chat completions request, read and checked: the messages, the sampling settings,
streaming; anything wrong is an ApiError naming the field. Unknown fields are ignored, as the
real API does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.grammar import grammar_for
from app.serve.api.body_check import check_body
from app.serve.api.image_parts import image_from_url
from app.serve.api.reasoning_request import chat_reasoning
from app.serve.api.schema_keywords import refuse_unenforced, refuse_unenforced_tools
from app.serve.http.errors import ApiError
from app.settings import SamplingParams
from app.tools.spec import ToolError, ToolSet, arguments_object, read_openai_tools

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_TOKENS_LIMIT = 32_768  # a larger max_tokens is refused: no context Cove runs holds that many
LOGIT_BIAS_LIMIT = 300  # the most tokens one logit_bias may name, as OpenAI's API allows


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    params: SamplingParams
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    grammar: str | None = None  # GBNF the reply must match (response_format)
    reply_format: dict[str, Any] | None = None  # response_format as given
    tools: ToolSet | None = None  # tools, tool_choice and parallel_tool_calls
    reasoning: str = ""  # the reasoning switch (app/serve/api/reasoning_request.py); "": the template's default
    messages_param: str = "messages"  # the field a refusal of the messages names


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"'{name}' must be a number, not {type(value).__name__}", param=name)
    if not low <= value <= high:
        raise ApiError(400, f"'{name}' must be between {low:g} and {high:g}; it was {value:g}", param=name)
    return float(value)


def _content(content: object, index: int, role: str) -> str | list[dict[str, Any]]:
    """A message's content: a string, or a list of text parts (the newer form), joined. A user
    message's list may hold image_url parts too (app/serve/api/image_parts.py): its content is
    then the list of its parts, text and images in order."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url" and isinstance(part, dict):
                where = f"messages[{index}].content[{j}]"
                if role != "user":
                    raise ApiError(400, f"{where}: an image_url part is allowed only in a user message", param="messages")
                raw = part.get("image_url")
                parts.append(image_from_url(raw.get("url") if isinstance(raw, dict) else raw, where=where, param="messages"))
                continue
            if not isinstance(part, dict) or kind != "text" or not isinstance(part.get("text"), str):
                allowed = "text and image_url parts are" if role == "user" else "text parts are"
                raise ApiError(400, f"messages[{index}].content: only {allowed} supported", param="messages")
            parts.append({"type": "text", "text": part["text"]})
        if any(p["type"] == "image" for p in parts):
            return parts
        return "".join(p["text"] for p in parts)
    if content is None:
        return ""
    allowed = "text and image_url parts" if role == "user" else "text parts"
    raise ApiError(400, f"messages[{index}].content must be a string or a list of {allowed}", param="messages")


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """Fields Cove cannot honour, refused by name rather than ignored."""
    if body.get("logprobs") not in (None, False) or body.get("top_logprobs") not in (None, 0):
        field = "logprobs" if body.get("logprobs") not in (None, False) else "top_logprobs"
        raise ApiError(400, f"'{field}' is not supported: Cove's server does not return token log probabilities; leave it out", param=field)


MODEL_REQUIRED = "'model' is required: the name of an installed model (GET /v1/models)"


def read_model(body: object, *, missing: str = MODEL_REQUIRED) -> tuple[dict[str, Any], str]:
    """What every endpoint reads first: the body, which must be a JSON object free of lone
    surrogates and not nested too deep (app/serve/api/body_check.py), and its model's name, which must
    be given (`missing`: the sentence when it is not, in the endpoint's words). Raises ApiError
    naming the field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    check_body(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, missing, param="model")
    return body, model


def read_chat_request(body: object) -> ChatRequest:
    body, model = read_model(body)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'messages' must be a non-empty list", param="messages")
    try:
        tools = read_openai_tools(body)
        messages = _messages(raw)
    except ToolError as exc:
        raise ApiError(400, exc.message, param=exc.param) from None
    _refuse_unsupported(body)
    refuse_unenforced_tools(body.get("tools"))
    if tools is not None and tools.active and body.get("response_format") not in (None, {"type": "text"}):
        raise ApiError(
            400,
            "'response_format' and 'tools' cannot be used together: a reply is either the tools' calls or the format's JSON",
            param="response_format",
        )
    sampling = read_sampling(body)
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and isinstance(response_format.get("json_schema"), dict):
        refuse_unenforced(response_format["json_schema"].get("schema"), "response_format.json_schema.schema", "response_format")
    try:
        grammar = grammar_for(response_format)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="response_format") from None
    return ChatRequest(
        model,
        messages,
        sampling.params,
        sampling.stop,
        sampling.stream,
        sampling.include_usage,
        grammar,
        response_format if isinstance(response_format, dict) else None,
        tools,
        chat_reasoning(body),
    )


def _messages(raw: list[Any]) -> list[dict[str, Any]]:
    """The messages with their tool turns: a reply's tool_calls (arguments as objects, as chat
    templates want them) and each tool result, which must answer a call made before it."""
    messages: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # call id -> tool name
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages[{i}] needs a role, one of {', '.join(ROLES)}", param="messages")
        role = "system" if message["role"] == "developer" else message["role"]
        item: dict[str, Any] = {"role": role, "content": _content(message.get("content"), i, role)}
        if role == "assistant" and message.get("tool_calls"):
            item["tool_calls"] = _tool_calls(message["tool_calls"], i, calls)
        thought = message.get("reasoning_content") if role == "assistant" else None
        if isinstance(thought, str) and thought:  # a reply's reasoning, as llama-server takes it back
            item["reasoning"] = thought
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in calls:
                raise ToolError(
                    f"messages[{i}].tool_call_id: {str(call_id)[:80]!r} answers no tool call of an earlier assistant message", "messages"
                )
            item.update(tool_call_id=call_id, name=calls[call_id])
        messages.append(item)
    return messages


def _tool_calls(raw: object, i: int, calls: dict[str, str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ToolError(f"messages[{i}].tool_calls: must be a list", "messages")
    out = []
    for j, call in enumerate(raw):
        where = f"messages[{i}].tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
            raise ToolError(f"{where}: needs an id and a function with a name and arguments", "messages")
        calls[call["id"]] = fn["name"]
        out.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": arguments_object(fn.get("arguments"), where)},
            }
        )
    return out


@dataclass(frozen=True)
class Sampling:
    """The settings chat and text completions share."""

    params: SamplingParams
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool


def _logit_bias(body: dict[str, Any]) -> tuple[tuple[int, float], ...]:
    """OpenAI's logit_bias: {"token id": bias from -100 to 100}, as (id, bias) pairs."""
    raw = body.get("logit_bias")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ApiError(400, "'logit_bias' must be an object mapping token ids to numbers from -100 to 100", param="logit_bias")
    if len(raw) > LOGIT_BIAS_LIMIT:
        raise ApiError(400, f"'logit_bias' may name at most {LOGIT_BIAS_LIMIT} tokens; it named {len(raw)}", param="logit_bias")
    pairs = []
    for key, value in raw.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and int(key) < 2**31):
            raise ApiError(
                400, f"'logit_bias' keys must be token ids (whole numbers written as strings); {key[:40]!r} is not one", param="logit_bias"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -100 <= value <= 100:
            raise ApiError(400, f"'logit_bias' values must be numbers from -100 to 100; token {key} has {value!r}", param="logit_bias")
        pairs.append((int(key), float(value)))
    return tuple(pairs)


def read_sampling(body: dict[str, Any], default_max_tokens: int | None = None) -> Sampling:
    """The shared settings; with no max_tokens the reply runs until the model stops or the context
    is full, unless the endpoint has a default of its own (`default_max_tokens`)."""
    n = body.get("n")
    if n is not None and n != 1:
        raise ApiError(400, "'n' must be 1: Cove writes one reply per request", param="n")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOKENS_LIMIT):
        raise ApiError(400, f"'max_tokens' must be a whole number from 1 to {MAX_TOKENS_LIMIT}", param="max_tokens")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ApiError(400, "'seed' must be a whole number", param="seed")
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop) if isinstance(stop, list) else ()
    if stop is not None and (
        not stops and not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > 4
    ):
        raise ApiError(400, "'stop' must be a string or a list of up to 4 strings", param="stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "'stream' must be true or false", param="stream")
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    defaults = SamplingParams()
    temperature = _number(body, "temperature", 0.0, 2.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    presence = _number(body, "presence_penalty", -2.0, 2.0)
    frequency = _number(body, "frequency_penalty", -2.0, 2.0)
    params = SamplingParams(
        temperature=defaults.temperature if temperature is None else temperature,
        top_p=defaults.top_p if top_p is None else top_p,
        max_tokens=limit if limit is not None else default_max_tokens,
        seed=seed,
        presence_penalty=presence or 0.0,
        frequency_penalty=frequency or 0.0,
        logit_bias=_logit_bias(body),
    )
    return Sampling(params, stops, stream, include_usage)
