"""The Anthropic Messages endpoint, POST /v1/messages: whole replies and Anthropic's named
server-sent event stream, with errors in Anthropic's shape, so the official `anthropic`
client works against `cove serve`; with tools, tool_use blocks and stop_reason "tool_use"
(app/tools/anthropic.py); a reply's reasoning (app/reasoning) as a `thinking` block before the
rest (streamed as thinking_delta). The reply runs through Service.reply like the OpenAI one."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.api.auto_model import cove_field
from app.serve.api.job import Job, chat_job
from app.serve.api.messages_request import MessagesRequest, read_messages_request
from app.serve.api.openai_api import ClosingStream
from app.serve.api.running import ReplyEvent, Running
from app.serve.api.service import MAX_CHARS_PER_TOKEN, Service, failure_error
from app.serve.http.errors import ApiError
from app.serve.http.http import CHAT_BODY_BYTES, json_body, sse
from app.statuses import MessageStatus
from app.store.request_log import timings
from app.tools.anthropic import BlockStream, content_blocks, usable
from app.tools.reply import ContentGate, family_named
from app.turn.events import EndEvent, ReasoningEvent, TextEvent

ENDPOINT = "/v1/messages"

# Anthropic's error type for each status (its clients read the status; people read the type).
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """The Anthropic error type an ApiError's status stands for."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def error_response(exc: ApiError) -> JSONResponse:
    message = too_long(exc.message) if exc.code == "context_length_exceeded" else exc.message
    return JSONResponse(error_body(exc.status, message), status_code=exc.status)


_NUMBER = re.compile(r"\d[\d,]*")


def too_long(message: str) -> str:
    """A prompt over the context in the words Anthropic's API uses, which clients that compact
    their context look for ("prompt is too long: N tokens > M maximum"), before the server's own
    sentence. N is the prompt with the tokens kept for the reply; where the prompt was refused
    before it was counted (too many messages or characters), the least it could be."""
    numbers = [int(n.replace(",", "")) for n in _NUMBER.findall(message)]
    if not numbers:
        return message
    limit, rest = numbers[0], numbers[1:]
    if "characters" in message and rest:
        tokens = rest[0] // MAX_CHARS_PER_TOKEN
    else:
        tokens = sum(rest[:2])
    return f"prompt is too long: {max(tokens, limit + 1)} tokens > {limit} maximum. {message}"


def stop_of(end: EndEvent, stops: tuple[str, ...], max_tokens: int | None) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of a reply that ended. The engine cuts a stop sequence out
    of the text, so its metrics say which one was met, under "stop_sequence" (None: none)."""
    metrics = end.message.metrics
    if end.status == MessageStatus.LENGTH:
        full = int(metrics.get("gen_tokens") or 0) < (max_tokens or 0)  # the context filled up first
        return ("model_context_window_exceeded" if full else "max_tokens"), None
    hit = metrics.get("stop_sequence")
    if isinstance(hit, str) and hit in stops:
        return "stop_sequence", hit
    return "end_turn", None


def thinking_blocks(reasoning: str) -> list[dict[str, Any]]:
    """A whole reply's thinking block (before its text), when it reasoned. Cove signs nothing:
    the signature is empty, and a thinking block sent back is read as it is."""
    return [{"type": "thinking", "thinking": reasoning, "signature": ""}] if reasoning else []


class _Thinking:
    """A stream's thinking block: opened at index 0 by the reply's first reasoning, closed before
    its text; `shift` is how far it moves the blocks after it."""

    def __init__(self) -> None:
        self.text = ""
        self.open = False
        self.closed = False

    @property
    def shift(self) -> int:
        return 1 if self.open or self.closed else 0

    def more(self, text: str) -> list[tuple[str, dict[str, Any]]]:
        if not text or self.closed:
            return []
        out: list[tuple[str, dict[str, Any]]] = []
        if not self.open:
            self.open = True
            out.append(("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        self.text += text
        out.append(("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": text}}))
        return out

    def close(self) -> list[tuple[str, dict[str, Any]]]:
        if not self.open or self.closed:
            return []
        self.open, self.closed = False, True
        return [
            ("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": ""}}),
            ("content_block_stop", {"index": 0}),
        ]


def _usage(metrics: dict[str, Any]) -> dict[str, int]:
    """Anthropic's counts: input_tokens are the prompt's tokens the engine evaluated, the ones
    its cache already held are cache_read_input_tokens."""
    prompt, cached = int(metrics.get("prompt_tokens") or 0), int(metrics.get("cached_tokens") or 0)
    return {"input_tokens": prompt - cached, "output_tokens": int(metrics.get("gen_tokens") or 0), "cache_read_input_tokens": cached}


class AnthropicApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def _job(self, req: MessagesRequest) -> Job:
        model, auto = await self.service.model_for(req.model, req)
        return chat_job(
            ENDPOINT,
            model,
            req,
            auto=auto,
            format_field="output_format",
            record={"top_k": req.top_k} if req.top_k is not None else None,
            call_id_prefix="toolu_",
            reasoning_param="thinking",
        )

    async def messages(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            body = await json_body(request, CHAT_BODY_BYTES)
            job = await self._job(await self.service.read(read_messages_request, body))
        except ApiError as exc:
            return error_response(exc)
        message_id = f"msg_{uuid.uuid4().hex}"
        if job.stream:
            return await self._start_stream(request, job, message_id)
        try:
            async with self.service.reply(request, job) as running:
                end = await running.whole()
        except ApiError as exc:
            return error_response(exc)
        if end.status == MessageStatus.ERROR:
            return error_response(failure_error(end, "thinking"))
        stop_reason, stop_sequence = stop_of(end, job.stop, job.params.max_tokens)
        written = end.message
        if usable(running.tool_reply):
            stop_reason, stop_sequence = "tool_use", None
        return JSONResponse(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": job.model.name,
                "content": thinking_blocks(running.reasoning_text) + content_blocks(running.tool_reply, written.content),
                "stop_reason": stop_reason,
                "stop_sequence": stop_sequence,
                "usage": _usage(written.metrics),
                "timings": timings(written.metrics),
                **cove_field(job),
                **({"warning": running.not_saved} if running.not_saved else {}),
            }
        )

    async def _start_stream(self, request: Request, job: Job, message_id: str) -> Response:
        """The stream begins at the reply's first event, which also brings the prompt's count
        for message_start: a reply that cannot start (a prompt larger than the context) is an
        error response, not a stream."""
        try:
            running, close, first = await self.service.open_stream(request, job)
        except ApiError as exc:
            return error_response(exc)
        return ClosingStream(
            self._stream(job, running, first, message_id), close, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    async def _stream(self, job: Job, running: Running, first: ReplyEvent | None, message_id: str) -> AsyncIterator[bytes]:
        thought = _Thinking()  # the thinking block, at index 0 when the reply reasons; the rest after it

        def event(name: str, **data: Any) -> bytes:
            if "index" in data:
                data["index"] += thought.shift
            return sse({"type": name, **data}, name)

        # The engine has counted the prompt by its first event (StartedInfo comes before it).
        info = running.generation.started or (first.started if isinstance(first, EndEvent) else None)
        metrics = first.message.metrics if isinstance(first, EndEvent) else {}
        prompt = info.prompt_tokens if info else int(metrics.get("prompt_tokens") or 0)
        cached = info.cached_tokens if info else int(metrics.get("cached_tokens") or 0)
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": job.model.name,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt - cached, "output_tokens": 0, "cache_read_input_tokens": cached},
            **cove_field(job),
        }
        yield event("message_start", message=message)
        tools = job.tools is not None and job.tools.active
        blocks: BlockStream | None = None  # with tools: the text block opens when there is text
        if tools:
            family = family_named(info.tool_format if info else str(metrics.get("tool_format") or ""))
            blocks = BlockStream(ContentGate(family, job.tools.names() if job.tools is not None else ()))
        # Without tools the text block opens before the ping, as Anthropic's does, unless the reply may
        # reason first (a thinking block then comes first and the text block opens at the first text).
        text_open = not tools and not (info.reasoning if info else "")
        if text_open:
            yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        yield event("ping")
        step = first
        while step is not None:
            if isinstance(step, ReasoningEvent):
                if not text_open and not (blocks is not None and blocks.text_open):
                    for name, data in thought.more(step.text):
                        yield sse({"type": name, **data}, name)
                step = await running.next()
                continue
            if isinstance(step, TextEvent):
                pieces = (
                    list(blocks.more("".join(running.text)))
                    if blocks is not None
                    else [("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": step.text}})]
                    if step.text
                    else []
                )
                if pieces:  # the thinking is over once text goes out
                    for name, data in thought.close():
                        yield sse({"type": name, **data}, name)
                if pieces and blocks is None and not text_open:
                    text_open = True
                    yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
                for name, data in pieces:
                    yield event(name, **data)
                step = await running.next()
                continue
            if step.status == MessageStatus.ERROR:  # after some text: the stream has begun
                failure = failure_error(step, "thinking")
                yield sse(error_body(500 if failure.status < 500 else failure.status, failure.message), "error")
                return
            stop_reason, stop_sequence = stop_of(step, job.stop, job.params.max_tokens)
            if not text_open and not (blocks is not None and blocks.text_open):  # the thinking the stream still held
                whole = running.reasoning_text
                for name, data in thought.more(whole[len(thought.text) :] if whole.startswith(thought.text) else ""):
                    yield sse({"type": name, **data}, name)
            for name, data in thought.close():
                yield sse({"type": name, **data}, name)
            if blocks is None and not text_open:
                text_open = True
                yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            if blocks is not None:
                for name, data in blocks.end(running.tool_reply, step.message.content):
                    yield event(name, **data)
                if usable(running.tool_reply):
                    stop_reason, stop_sequence = "tool_use", None
            else:
                yield event("content_block_stop", index=0)
            yield event(
                "message_delta",
                delta={"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                usage={"output_tokens": int(step.message.metrics.get("gen_tokens") or 0)},
                timings=timings(step.message.metrics),
            )
            if running.not_saved:  # the whole reply went out; what the history could not take is said last
                yield sse(error_body(500, running.not_saved), "error")
            yield event("message_stop")
            return
