"""`Job`: one reply an endpoint asks for, as its reader built it: the reply's request (the
`ReplyRequest` the Turn, the pool's engine and the pipe carry unchanged), and what only the
server keeps beside it (the record's view of the request, how the reply's tool calls are read,
which field a refusal names). `chat_job` builds it for the three chat endpoints, whose readers
read one shape (`ChatRead`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.engine.request import ReplyRequest
from app.routing.auto import AutoChoice
from app.serve.api.request_turn import api_request
from app.settings import SamplingParams
from app.tools.spec import ToolSet
from models.library import InstalledModel


@dataclass(frozen=True)
class Job:
    """One reply an endpoint asks for. `request` is what the model is asked; `messages` and
    `params` are the request as the record keeps it (the messages as the client sent them, the
    sampling settings it named), `params.n_ctx` the context the pool loads the engine with."""

    endpoint: str
    model: InstalledModel
    request: ReplyRequest
    messages: list[dict[str, Any]]
    params: SamplingParams
    stream: bool = False
    record_params: dict[str, Any] = field(default_factory=dict)  # more settings the record keeps (e.g. response_format)
    tools: ToolSet | None = None  # the tools the model may call, for reading the reply's calls (app/tools/)
    call_id_prefix: str = "call_"  # how the ids of the reply's tool calls begin (Anthropic's: "toolu_")
    reasoning_param: str = "reasoning_effort"  # the field a refused switch is named by (thinking, reasoning)
    reply_format: dict[str, Any] | None = None  # the JSON format the grammar keeps the reply to, as the request gave it
    messages_param: str = "messages"  # the field a refusal of the messages names (Responses': input)
    auto: AutoChoice | None = None  # Auto's choice of the model, when the request named "auto"

    @property
    def stop(self) -> tuple[str, ...]:
        return self.request.stop

    @property
    def reasoning(self) -> str:
        return self.request.reasoning


class ChatRead(Protocol):
    """What the chat endpoints' readers read (chat_request.py, responses_request.py,
    messages_request.py), each in its API's words."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...
    @property
    def params(self) -> SamplingParams: ...
    @property
    def stop(self) -> tuple[str, ...]: ...
    @property
    def stream(self) -> bool: ...
    @property
    def grammar(self) -> str | None: ...
    @property
    def reply_format(self) -> dict[str, Any] | None: ...
    @property
    def tools(self) -> ToolSet | None: ...
    @property
    def reasoning(self) -> str: ...
    @property
    def messages_param(self) -> str: ...


def chat_job(
    endpoint: str,
    model: InstalledModel,
    read: ChatRead,
    *,
    format_field: str,
    record: Mapping[str, Any] | None = None,
    call_id_prefix: str = "call_",
    reasoning_param: str = "reasoning_effort",
    auto: AutoChoice | None = None,
) -> Job:
    """The Job of a chat request as `read`: its reply's request (api_request), and the record's
    settings: `record`'s, the JSON format under the API's own name for it (`format_field`), the
    tools as offered, the reasoning switch and Auto's choice of the model (`auto`)."""
    kept: dict[str, Any] = dict(record or {})
    if auto is not None:
        kept["auto"] = auto.record()
    if read.reply_format:
        kept[format_field] = read.reply_format
    if read.tools is not None:
        kept.update(read.tools.record())
    if read.reasoning:
        kept["reasoning_effort"] = read.reasoning
    request = api_request(read.messages, read.params, stop=read.stop, grammar=read.grammar, tools=read.tools, reasoning=read.reasoning)
    return Job(
        endpoint,
        model,
        request,
        read.messages,
        read.params,
        read.stream,
        record_params=kept,
        tools=read.tools,
        call_id_prefix=call_id_prefix,
        reasoning_param=reasoning_param,
        reply_format=read.reply_format if read.grammar else None,
        messages_param=read.messages_param,
        auto=auto,
    )
