"""The OpenAI endpoints: GET /v1/models and POST /v1/chat/completions (whole replies and
server-sent event streams), in the shapes the official clients read."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.generation import TokenEvent
from app.serve.chat_request import ChatRequest, read_chat_request
from app.serve.errors import ApiError
from app.serve.http import MAX_BODY_BYTES, json_body, sse
from app.serve.service import Job, Service, timings, usage
from app.store.statuses import MessageStatus

_FINISH: dict[str, str] = {MessageStatus.COMPLETE: "stop", MessageStatus.LENGTH: "length", MessageStatus.CANCELLED: "stop"}


class OpenAIApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def models(self, request: Request) -> JSONResponse:
        try:
            self.service.client(request)
        except ApiError as exc:
            return exc.response()
        data = [{"id": m.name, "object": "model", "created": 0, "owned_by": "cove"}
                for m in self.service.core.library.list()]
        return JSONResponse({"object": "list", "data": data})

    def _job(self, chat: ChatRequest, request: Request) -> Job:
        return Job(request.url.path, self.service.model(chat.model), chat.messages, chat.params, chat.stop, chat.stream)

    async def chat_completions(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = self.service.client(request)
            chat = read_chat_request(await json_body(request, MAX_BODY_BYTES))
            job = self._job(chat, request)
        except ApiError as exc:
            return exc.response()
        reply_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if job.stream:
            return StreamingResponse(self._stream(request, job, reply_id, created, chat.include_usage),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            async with self.service.reply(request, job) as running:
                finished = await running.whole()
        except ApiError as exc:
            return exc.response()
        if finished.status == MessageStatus.ERROR:
            return ApiError(500, finished.error or "the engine stopped without a reply", "server_error").response()
        return JSONResponse({
            "id": reply_id, "object": "chat.completion", "created": created, "model": job.model.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": finished.text},
                         "finish_reason": _FINISH.get(finished.status, "stop"), "logprobs": None}],
            "usage": usage(finished.metrics), "timings": timings(finished.metrics),
        })

    async def _stream(self, request: Request, job: Job, reply_id: str, created: int,
                      include_usage: bool) -> AsyncIterator[bytes]:
        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            return sse({"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": job.model.name,
                        "choices": choices, **extra})

        def delta(content: dict[str, Any], finish: str | None = None) -> bytes:
            return chunk([{"index": 0, "delta": content, "finish_reason": finish, "logprobs": None}])

        try:
            async with self.service.reply(request, job) as running:
                yield delta({"role": "assistant", "content": ""})
                while (event := await running.next()) is not None:
                    if isinstance(event, TokenEvent):
                        yield delta({"content": event.text})
                        continue
                    if event.status == MessageStatus.ERROR:
                        yield sse({"error": {"message": event.error or "the engine stopped without a reply",
                                             "type": "server_error"}})
                        return
                    yield delta({}, _FINISH.get(event.status, "stop"))
                    if include_usage:
                        yield chunk([], usage=usage(event.metrics), timings=timings(event.metrics))
                    yield b"data: [DONE]\n\n"
        except ApiError as exc:
            yield sse({"error": {"message": exc.message, "type": exc.kind, "code": exc.code}})
