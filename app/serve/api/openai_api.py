"""The OpenAI endpoints: GET /v1/models, GET /v1/models/{id} and POST /v1/chat/completions
(whole replies and server-sent event streams), in the shapes the official clients read. A reply's
reasoning (app/reasoning) is the message's `reasoning_content`, whole and streamed, as
llama-server and DeepSeek send it."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.routing.auto import is_auto
from app.serve.api.auto_model import cove_field
from app.serve.api.chat_request import ChatRequest, read_chat_request
from app.serve.api.job import Job, chat_job
from app.serve.api.model_listing import auto_entry, listing, model_entry, served_headers
from app.serve.api.running import ReplyEvent, Running
from app.serve.api.service import Service, failure_error
from app.serve.http.errors import ApiError
from app.serve.http.http import CHAT_BODY_BYTES, json_body, sse
from app.statuses import MessageStatus
from app.store.request_log import timings, usage
from app.tools.parsers import Call
from app.tools.reply import ContentGate, argument_pieces, family_named, read_reply
from app.turn.events import ReasoningEvent, TextEvent

FINISH: dict[str, str] = {MessageStatus.COMPLETE: "stop", MessageStatus.LENGTH: "length", MessageStatus.CANCELLED: "stop"}


class OpenAIApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def models(self, request: Request) -> JSONResponse:
        try:
            await self.service.client(request)
        except ApiError as exc:
            return exc.response()
        pool = self.service.pool
        return JSONResponse(listing(await self.service.models(), pool.loaded(), pool.waiting()))

    async def model(self, request: Request) -> JSONResponse:
        """One installed model, by any name `Service.model` knows it by; 404 in OpenAI's shape if none."""
        try:
            await self.service.client(request)
            if is_auto(request.path_params["model"]):
                return JSONResponse(auto_entry(await self.service.models()))
            found = await self.service.model(request.path_params["model"])
        except ApiError as exc:
            return exc.response()
        return JSONResponse(model_entry(found, self.service.pool.loaded()))

    async def _job(self, chat: ChatRequest, request: Request) -> Job:
        model, auto = await self.service.model_for(chat.model, chat)
        return chat_job(request.url.path, model, chat, format_field="response_format", auto=auto)

    async def chat_completions(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            chat = await self.service.read(read_chat_request, await json_body(request, CHAT_BODY_BYTES))
            job = await self._job(chat, request)
        except ApiError as exc:
            return exc.response()
        reply_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if job.stream:
            return await self._start_stream(request, job, reply_id, created, chat.include_usage)
        try:
            async with self.service.reply(request, job) as running:
                end = await running.whole()
        except ApiError as exc:
            return exc.response()
        if end.status == MessageStatus.ERROR:
            return failure_error(end).response()
        written = end.message
        message: dict[str, Any] = {"role": "assistant", "content": written.content}
        finish = FINISH.get(end.status, "stop")
        if job.tools is not None and job.tools.active:
            reply = running.tool_reply or read_reply(
                job.tools, family_named(str(written.metrics.get("tool_format") or "")), written.content
            )
            if reply.calls:  # as written, even one that breaks its schema (the record keeps the problem)
                message = {"role": "assistant", "content": reply.content or None, "tool_calls": [_call_entry(c) for c in reply.calls]}
                finish = "tool_calls"
        if running.reasoning_text:
            message["reasoning_content"] = running.reasoning_text
        return JSONResponse(
            {
                "id": reply_id,
                "object": "chat.completion",
                "created": created,
                "model": job.model.name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage_of(written.metrics),
                "timings": timings(written.metrics),
                **cove_field(job),
                **({"warning": running.not_saved} if running.not_saved else {}),
            },
            headers=served_headers(job.model),
        )

    async def _start_stream(self, request: Request, job: Job, reply_id: str, created: int, include_usage: bool) -> Response:
        """The stream's status is known at its first event: a reply that cannot start (a prompt
        larger than the context, a grammar refused) is an error response, not a stream."""
        try:
            running, close, first = await self.service.open_stream(request, job)
        except ApiError as exc:
            return exc.response()
        return ClosingStream(
            self._stream(job, running, first, reply_id, created, include_usage),
            close,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **served_headers(job.model)},
        )

    async def _stream(
        self,
        job: Job,
        running: Running,
        first: ReplyEvent | None,
        reply_id: str,
        created: int,
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            return sse(
                {
                    "id": reply_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": job.model.name,
                    "choices": choices,
                    **extra,
                }
            )

        def delta(content: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            return chunk([{"index": 0, "delta": content, "finish_reason": finish, "logprobs": None}], **extra)

        yield delta({"role": "assistant", "content": ""}, **cove_field(job))  # Auto's choice, when it chose
        tools = job.tools if job.tools is not None and job.tools.active else None
        gate: ContentGate | None = None
        event = first
        while event is not None:
            if isinstance(event, ReasoningEvent):
                yield delta({"reasoning_content": event.text})
                event = await running.next()
                continue
            if isinstance(event, TextEvent):
                if tools is None:
                    if event.text or not running.reasoning:
                        yield delta({"content": event.text})
                else:
                    if gate is None:
                        started = running.generation.started
                        gate = ContentGate(family_named(started.tool_format if started else ""), tools.names())
                    text = gate.more("".join(running.text))
                    if text:
                        yield delta({"content": text})
                event = await running.next()
                continue
            written = event.message
            if event.status == MessageStatus.ERROR:
                yield sse({"error": {"message": written.error or "the engine stopped without a reply", "type": "server_error"}})
                return
            finish = FINISH.get(event.status, "stop")
            if tools is not None:
                family = family_named(str(written.metrics.get("tool_format") or ""))
                gate = gate or ContentGate(family, tools.names())
                reply = running.tool_reply or read_reply(tools, family, written.content)  # read once as the reply closed
                rest = gate.rest(reply) if reply.calls else written.content[len(gate.sent) :]
                if rest:
                    yield delta({"content": rest})
                for i, call in enumerate(reply.calls):
                    yield delta(
                        {"tool_calls": [{"index": i, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}
                    )
                    for piece in argument_pieces(call.arguments):
                        yield delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                if reply.calls:
                    finish = "tool_calls"
            yield delta({}, finish)
            if include_usage:
                yield chunk([], usage=usage_of(written.metrics), timings=timings(written.metrics))
            if running.not_saved:  # the whole reply went out; what the history could not take is said last
                yield sse({"error": {"message": running.not_saved, "type": "server_error", "code": "history_not_saved"}})
            yield b"data: [DONE]\n\n"
            return


def usage_of(metrics: dict[str, Any]) -> dict[str, Any]:
    """The reply's token counts; a reply that reasoned says how many of its tokens did
    (`completion_tokens_details.reasoning_tokens`, as OpenAI's API does)."""
    counts: dict[str, Any] = usage(metrics)
    if metrics.get("reasoning_tokens"):
        counts["completion_tokens_details"] = {"reasoning_tokens": int(metrics["reasoning_tokens"])}
    return counts


def _call_entry(call: Call) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


class ClosingStream(StreamingResponse):
    """A stream whose reply is closed (the engine given back, the request recorded) however the
    response ends: finished, or the client gone before or while it was sent."""

    def __init__(self, content: AsyncIterator[bytes], close: Callable[[], Awaitable[None]], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._close()
