"""POST /v1/messages/count_tokens, Anthropic's token count: the request's messages rendered with
the model's chat template and tokenized by its engine, which evaluates the prompt and writes one
token (the engine has no tokenize-only message), so the count is the prompt the model would read.
It is a question about a request, not a reply: not entered in the record or the history."""

from __future__ import annotations

from dataclasses import replace

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.engine.client import EngineError
from app.engine.generation import FinishedEvent, Generation
from app.engine.request import ReplyRequest
from app.serve.api.anthropic_api import error_response
from app.serve.api.messages_request import read_messages_request
from app.serve.api.request_turn import api_request
from app.serve.api.service import Service, failure_error, refuse_what_it_cannot_see
from app.serve.http.errors import ApiError
from app.serve.http.http import CHAT_BODY_BYTES, json_body
from app.statuses import MessageStatus
from app.turn.backend import backend_for
from models.library import InstalledModel


class TokenCounter:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def count_tokens(self, request: Request) -> Response:
        try:
            client = await self.service.client(request)
            body = await json_body(request, CHAT_BODY_BYTES)
            if isinstance(body, dict) and body.get("max_tokens") is None:
                body = {**body, "max_tokens": 1}  # count_tokens has no max_tokens; the reader requires one
            req = await self.service.read(read_messages_request, body)
            if self.service.stopping:
                raise ApiError(503, "the server is stopping", "server_error")
            # The person's sampling, one token written; the tools are rendered into the prompt as for
            # a reply (with tool_choice "none" they are not).
            params = replace(self.service.core.settings.sampling, max_tokens=1)
            asked = api_request(req.messages, params, tools=req.tools)
            model = await self.service.model(req.model)
            refuse_what_it_cannot_see(model, asked)
            count = await self._count(model, asked, client, n_ctx=params.n_ctx)
        except ApiError as exc:
            return error_response(exc)
        return JSONResponse({"input_tokens": count})

    async def _count(self, model: InstalledModel, asked: ReplyRequest, client: str, *, n_ctx: int | None) -> int:
        """The prompt tokens of `asked` on `model`; `n_ctx`: the context a load here asks for."""
        pool = self.service.pool
        options = await self.service.load_options(model)  # read before the pool may spawn an engine with them
        lease = await pool.lease(model, client)
        generation: Generation | None = None
        try:
            window = lease.engine is pool.window_engine
            backend = backend_for(
                model,
                engine=lease.client,
                options=options,
                loaded_as_is=window,
                load=None if window else lambda: pool.load(lease.engine),
                n_ctx=n_ctx,
            )

            def start() -> Generation:
                try:
                    return backend.start(asked)
                except EngineError as exc:
                    raise ApiError(500, str(exc), "server_error") from None

            generation = await anyio.to_thread.run_sync(start)
            finished: FinishedEvent = await anyio.to_thread.run_sync(generation.wait)
        finally:
            if generation is not None and not generation.done:  # the client went away, the server stopped
                generation.cancel()
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(generation.wait)
            pool.release(lease)
        failure = finished.failure
        if finished.status == MessageStatus.ERROR:
            if failure is not None and failure.kind == "context" and failure.prompt_tokens and not failure.at_least:
                return int(failure.prompt_tokens)  # longer than the context, but counted
            raise failure_error(finished)
        started = finished.started or generation.started
        if started is not None:
            return started.prompt_tokens
        return int(finished.metrics.get("prompt_tokens") or 0)
