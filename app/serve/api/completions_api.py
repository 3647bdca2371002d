"""POST /v1/completions, OpenAI's text completions: the prompt completed as it is, with no chat
template (for editors' code completion and base models), whole or streamed."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.api.chat_request import Sampling, read_model, read_sampling
from app.serve.api.job import Job
from app.serve.api.openai_api import FINISH, ClosingStream
from app.serve.api.request_turn import api_request
from app.serve.api.running import ReplyEvent, Running
from app.serve.api.service import Service, failure_error
from app.serve.http.errors import ApiError
from app.serve.http.http import MAX_BODY_BYTES, json_body, sse
from app.statuses import MessageStatus
from app.store.request_log import timings, usage
from app.turn.events import ReasoningEvent, TextEvent
from models.library import InstalledModel

DEFAULT_MAX_TOKENS = 16  # the real API's default for text completions


@dataclass(frozen=True)
class CompletionRequest:
    model: str  # the name the client gave
    prompt: str
    sampling: Sampling

    def job(self, model: InstalledModel, endpoint: str) -> Job:
        messages = [{"role": "user", "content": self.prompt}]  # the record's view of a text completion
        params, stop = self.sampling.params, self.sampling.stop
        request = api_request(messages, params, stop=stop, raw_prompt=self.prompt)
        return Job(endpoint, model, request, messages, params, self.sampling.stream, record_params={"completion": True})


def read_completion_request(body: object) -> CompletionRequest:
    """A completions request as read; ApiError naming the field."""
    body, name = read_model(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string (or a list of one string): Cove completes one prompt per request", param="prompt")
    for field, unsupported in (
        ("echo", body.get("echo") is True),
        ("suffix", bool(body.get("suffix"))),
        ("logprobs", body.get("logprobs") not in (None, 0, False)),
        ("best_of", body.get("best_of") not in (None, 1)),
    ):
        if unsupported:
            raise ApiError(400, f"'{field}' is not supported by Cove's completions", param=field)
    return CompletionRequest(name, prompt, read_sampling(body, DEFAULT_MAX_TOKENS))


class CompletionsApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def completions(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            read = read_completion_request(await json_body(request, MAX_BODY_BYTES))
            job, include_usage = read.job(await self.service.model(read.model), request.url.path), read.sampling.include_usage
        except ApiError as exc:
            return exc.response()
        reply_id, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        if not job.stream:
            try:
                async with self.service.reply(request, job) as running:
                    end = await running.whole()
            except ApiError as exc:
                return exc.response()
            if end.status == MessageStatus.ERROR:
                return failure_error(end).response()
            written = end.message
            body = self._body(
                reply_id,
                created,
                job,
                written.content,
                FINISH.get(end.status, "stop"),
                usage=usage(written.metrics),
                timings=timings(written.metrics),
            )
            return JSONResponse({**body, "warning": running.not_saved} if running.not_saved else body)
        try:
            running, close, first = await self.service.open_stream(request, job)
        except ApiError as exc:
            return exc.response()
        return ClosingStream(
            self._stream(reply_id, created, job, running, first, include_usage),
            close,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    @staticmethod
    def _body(reply_id: str, created: int, job: Job, text: str, finish: str | None, **extra: Any) -> dict[str, Any]:
        return {
            "id": reply_id,
            "object": "text_completion",
            "created": created,
            "model": job.model.name,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            **extra,
        }

    async def _stream(
        self,
        reply_id: str,
        created: int,
        job: Job,
        running: Running,
        first: ReplyEvent | None,
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        event = first
        while event is not None:
            if isinstance(event, ReasoningEvent):  # a raw prompt has no template to reason by: never sent
                event = await running.next()
                continue
            if isinstance(event, TextEvent):
                yield sse(self._body(reply_id, created, job, event.text, None))
                event = await running.next()
                continue
            if event.status == MessageStatus.ERROR:
                yield sse({"error": {"message": event.message.error or "the engine stopped without a reply", "type": "server_error"}})
                return
            yield sse(self._body(reply_id, created, job, "", FINISH.get(event.status, "stop")))
            if include_usage:
                body = self._body(
                    reply_id, created, job, "", None, usage=usage(event.message.metrics), timings=timings(event.message.metrics)
                )
                body["choices"] = []
                yield sse(body)
            if running.not_saved:  # the whole reply went out; what the history could not take is said last
                yield sse({"error": {"message": running.not_saved, "type": "server_error", "code": "history_not_saved"}})
            yield b"data: [DONE]\n\n"
            return
