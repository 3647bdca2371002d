"""The Anthropic Messages endpoint, POST /v1/messages: whole replies and Anthropic's named
server-sent event stream, with errors in Anthropic's shape, so the official `anthropic`
client works against `cove serve`. The reply runs through Service.reply like the OpenAI one."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.generation import FinishedEvent, TokenEvent
from app.serve.errors import ApiError
from app.serve.http import MAX_BODY_BYTES, json_body, sse
from app.serve.messages_request import MessagesRequest, read_messages_request
from app.serve.openai_api import ClosingStream
from app.serve.service import Job, Running, Service, failure_error
from app.store.request_log import timings
from app.store.statuses import MessageStatus

ENDPOINT = "/v1/messages"

# Anthropic's error type for each status (its clients read the status; people read the type).
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
                529: "overloaded_error"}


def error_type(status: int) -> str:
    """The Anthropic error type an ApiError's status stands for."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message), status_code=exc.status)


def stop_of(finished: FinishedEvent, stops: tuple[str, ...], max_tokens: int | None) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of a reply that ended. The engine cuts a stop sequence out
    of the text, so its metrics say which one was met, under "stop_sequence" (None: none)."""
    if finished.status == MessageStatus.LENGTH:
        full = int(finished.metrics.get("gen_tokens") or 0) < (max_tokens or 0)  # the context filled up first
        return ("model_context_window_exceeded" if full else "max_tokens"), None
    hit = finished.metrics.get("stop_sequence")
    if isinstance(hit, str) and hit in stops:
        return "stop_sequence", hit
    return "end_turn", None


def _usage(metrics: dict[str, Any]) -> dict[str, int]:
    """Anthropic's counts: input_tokens are the prompt's tokens the engine evaluated, the ones
    its cache already held are cache_read_input_tokens."""
    prompt, cached = int(metrics.get("prompt_tokens") or 0), int(metrics.get("cached_tokens") or 0)
    return {"input_tokens": prompt - cached, "output_tokens": int(metrics.get("gen_tokens") or 0),
            "cache_read_input_tokens": cached}


class AnthropicApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def _job(self, req: MessagesRequest) -> Job:
        record: dict[str, Any] = {"top_k": req.top_k} if req.top_k is not None else {}
        if req.output_format is not None:
            record["output_format"] = req.output_format
        return Job(endpoint=ENDPOINT, model=await self.service.model(req.model), messages=req.messages, params=req.params,
                   stop=req.stop, stream=req.stream, grammar=req.grammar, record_params=record)

    async def messages(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            job = await self._job(read_messages_request(await json_body(request, MAX_BODY_BYTES)))
        except ApiError as exc:
            return error_response(exc)
        message_id = f"msg_{uuid.uuid4().hex}"
        if job.stream:
            return await self._start_stream(request, job, message_id)
        try:
            async with self.service.reply(request, job) as running:
                finished = await running.whole()
        except ApiError as exc:
            return error_response(exc)
        if finished.status == MessageStatus.ERROR:
            return error_response(failure_error(finished))
        stop_reason, stop_sequence = stop_of(finished, job.stop, job.params.max_tokens)
        return JSONResponse({
            "id": message_id, "type": "message", "role": "assistant", "model": job.model.name,
            "content": [{"type": "text", "text": finished.text}],
            "stop_reason": stop_reason, "stop_sequence": stop_sequence,
            "usage": _usage(finished.metrics), "timings": timings(finished.metrics),
            **({"warning": running.not_saved} if running.not_saved else {}),
        })

    async def _start_stream(self, request: Request, job: Job, message_id: str) -> Response:
        """The stream begins at the reply's first event, which also brings the prompt's count
        for message_start: a reply that cannot start (a prompt larger than the context) is an
        error response, not a stream."""
        try:
            running, close, first = await self.service.open_stream(request, job)
        except ApiError as exc:
            return error_response(exc)
        return ClosingStream(self._stream(job, running, first, message_id), close, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})

    async def _stream(self, job: Job, running: Running, first: TokenEvent | FinishedEvent | None,
                      message_id: str) -> AsyncIterator[bytes]:
        def event(name: str, **data: Any) -> bytes:
            return sse({"type": name, **data}, name)

        # The engine has counted the prompt by its first event (StartedInfo comes before it).
        info = running.generation.started or (first.started if isinstance(first, FinishedEvent) else None)
        metrics = first.metrics if isinstance(first, FinishedEvent) else {}
        prompt = info.prompt_tokens if info else int(metrics.get("prompt_tokens") or 0)
        cached = info.cached_tokens if info else int(metrics.get("cached_tokens") or 0)
        message: dict[str, Any] = {
            "id": message_id, "type": "message", "role": "assistant", "model": job.model.name, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": prompt - cached, "output_tokens": 0, "cache_read_input_tokens": cached}}
        yield event("message_start", message=message)
        yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        yield event("ping")
        step = first
        while step is not None:
            if isinstance(step, TokenEvent):
                if step.text:
                    yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": step.text})
                step = await running.next()
                continue
            if step.status == MessageStatus.ERROR:  # after some text: the stream has begun
                failure = failure_error(step)
                yield sse(error_body(500 if failure.status < 500 else failure.status, failure.message), "error")
                return
            stop_reason, stop_sequence = stop_of(step, job.stop, job.params.max_tokens)
            yield event("content_block_stop", index=0)
            yield event("message_delta", delta={"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                        usage={"output_tokens": int(step.metrics.get("gen_tokens") or 0)}, timings=timings(step.metrics))
            if running.not_saved:  # the whole reply went out; what the history could not take is said last
                yield sse(error_body(500, running.not_saved), "error")
            yield event("message_stop")
            return
