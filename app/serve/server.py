"""The HTTP side of `cove serve`: a Starlette app with the OpenAI endpoints, the Host-header
check that keeps web pages out (DNS rebinding), a request size limit, and replies streamed
from Cove's engine as server-sent events. One engine; requests for it wait their turn in order."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.chat import start_generation
from app.core import Core
from app.engine.client import EngineClient, EngineError
from app.engine.generation import FinishedEvent, TokenEvent
from app.serve.chat_request import ChatRequest, read_chat_request
from app.serve.errors import ApiError, error_response
from app.serve.keys import ApiKeys
from app.store.request_log import RequestLog
from app.store.statuses import MessageStatus
from models.library import InstalledModel, ModelNotFound

MAX_BODY_BYTES = 4 * 1024 * 1024
CLIENT = "local API"  # the record's client for a loopback request while no key is made
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_FINISH: dict[str, str] = {MessageStatus.COMPLETE: "stop", MessageStatus.LENGTH: "length", MessageStatus.CANCELLED: "stop"}


class HostCheck:
    """Refuses requests whose Host header is not one of this server's names: a web page the
    person opens could otherwise reach the loopback server through a name it controls."""

    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        self.app, self.names = app, frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
            if name.lower() not in self.names:
                response = error_response(421, f"this server does not answer for the host {host!r}", "invalid_request_error")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _json_body(request: Request, limit: int) -> object:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, f"the request body is larger than {limit:,} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise ApiError(413, f"the request body is larger than {limit:,} bytes")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None


def _sse(event: dict[str, Any]) -> bytes:
    """One server-sent event holding `event` as JSON."""
    return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def _usage(metrics: dict[str, Any]) -> dict[str, Any]:
    prompt, completion = int(metrics.get("prompt_tokens") or 0), int(metrics.get("gen_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(metrics.get("cached_tokens") or 0)}}


def _timings(metrics: dict[str, Any]) -> dict[str, Any]:
    """Cove's own clocks for the reply (the engine's, not the client's)."""
    return {"prompt_ms": metrics.get("prefill_ms"), "ttft_ms": metrics.get("ttft_ms"),
            "tokens_per_second": metrics.get("gen_tps"), "cached_tokens": metrics.get("cached_tokens")}


class Service:
    """What the endpoints serve from: the model library (read on the event loop's thread, which
    opened the database) and one engine whose requests take turns."""

    def __init__(self, core: Core, engine: EngineClient) -> None:
        self.core, self.engine = core, engine
        self.turn = anyio.Lock()  # FIFO: waiting requests get the engine in the order they came
        self.record = RequestLog(core.db)
        self.keys = ApiKeys(core.db)

    def client(self, request: Request) -> str:
        """Who is asking: the name of the key the request carries (Authorization: Bearer, or
        x-api-key). Without any key made, a loopback request is the "local API"."""
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "").strip()
        if not self.keys.names():
            return CLIENT
        name = self.keys.name_of(key) if key else None
        if name is None:
            raise ApiError(401, "a valid API key is needed (cove serve keys add NAME makes one)", "authentication_error",
                           code="invalid_api_key")
        return name

    def _log(self, request: Request, chat: ChatRequest, model: InstalledModel, reply: str, status: str,
             metrics: dict[str, Any]) -> None:
        client = request.scope.get("cove.client", CLIENT)
        """One entry in the written record, on the event loop's thread (the database's)."""
        params = {"temperature": chat.params.temperature, "top_p": chat.params.top_p, "max_tokens": chat.params.max_tokens,
                  "seed": chat.params.seed, "stop": list(chat.stop), "stream": chat.stream}
        self.record.append(client=client, remote=request.client.host if request.client else "", endpoint=request.url.path,
                           model_name=model.name, model_sha256=model.sha256, quant=model.quant, params=params,
                           messages=chat.messages, reply=reply, status=status, usage=_usage(metrics),
                           timings=_timings(metrics))

    def model(self, name: str) -> InstalledModel:
        try:
            return self.core.library.get(name)
        except ModelNotFound:
            raise ApiError(404, f"the model '{name}' is not installed here (GET /v1/models lists them)",
                           code="model_not_found", param="model") from None

    async def models(self, request: Request) -> JSONResponse:
        try:
            self.client(request)
        except ApiError as exc:
            return exc.response()
        data = [{"id": m.name, "object": "model", "created": 0, "owned_by": "cove"} for m in self.core.library.list()]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = self.client(request)
            chat = read_chat_request(await _json_body(request, MAX_BODY_BYTES))
            model = self.model(chat.model)
        except ApiError as exc:
            return exc.response()
        reply_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if chat.stream:
            return StreamingResponse(self._stream(request, chat, model, reply_id, created), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        async with self.turn:
            try:
                finished = await anyio.to_thread.run_sync(self._whole_reply, chat, model)
            except ApiError as exc:
                self._log(request, chat, model, "", MessageStatus.ERROR, {})
                return exc.response()
        self._log(request, chat, model, finished.text, finished.status, finished.metrics)
        return JSONResponse({
            "id": reply_id, "object": "chat.completion", "created": created, "model": model.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": finished.text},
                         "finish_reason": _FINISH.get(finished.status, "stop"), "logprobs": None}],
            "usage": _usage(finished.metrics), "timings": _timings(finished.metrics),
        })

    def _start(self, chat: ChatRequest, model: InstalledModel):  # noqa: ANN202 - a Generation
        try:
            return start_generation(self.engine, chat.messages, model=model, params=chat.params, conversation_id=None,
                                    stop=chat.stop)
        except EngineError as exc:
            raise ApiError(500, str(exc), "server_error") from None

    def _whole_reply(self, chat: ChatRequest, model: InstalledModel) -> FinishedEvent:
        generation = self._start(chat, model)
        finished = None
        for event in generation:
            if isinstance(event, FinishedEvent):
                finished = event
        if finished is None or finished.status == MessageStatus.ERROR:
            raise ApiError(500, (finished.error if finished else None) or "the engine stopped without a reply", "server_error")
        return finished

    async def _stream(self, request: Request, chat: ChatRequest, model: InstalledModel, reply_id: str,
                      created: int) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            body = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model.name,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
            return _sse(body)

        async with self.turn:
            try:
                generation = await anyio.to_thread.run_sync(self._start, chat, model)
            except ApiError as exc:
                self._log(request, chat, model, "", MessageStatus.ERROR, {})
                yield _sse({"error": {"message": exc.message, "type": exc.kind}})
                return
            done = False
            text: list[str] = []
            try:
                yield chunk({"role": "assistant", "content": ""})
                while True:
                    event = await anyio.to_thread.run_sync(next, generation, None)
                    if isinstance(event, TokenEvent):
                        text.append(event.text)
                        yield chunk({"content": event.text})
                        continue
                    done = True
                    self._log(request, chat, model, event.text if event else "".join(text),
                              event.status if event else MessageStatus.ERROR, event.metrics if event else {})
                    if event is None or event.status == MessageStatus.ERROR:
                        message = (event.error if event else None) or "the engine stopped without a reply"
                        yield _sse({"error": {"message": message, "type": "server_error"}})
                        return
                    yield chunk({}, _FINISH.get(event.status, "stop"))
                    if chat.include_usage:
                        body = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model.name,
                                "choices": [], "usage": _usage(event.metrics), "timings": _timings(event.metrics)}
                        yield _sse(body)
                    yield b"data: [DONE]\n\n"
                    return
            finally:
                if not done:  # the client went away: stop the engine, and let it finish before the next turn
                    generation.cancel()
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(lambda: [None for _ in generation])
                        end = generation.finished
                        self._log(request, chat, model, end.text if end else "".join(text), MessageStatus.CANCELLED,
                                  end.metrics if end else {})


def create_app(core: Core, engine: EngineClient, *, host_names: Iterable[str] | None = LOOPBACK_NAMES) -> ASGIApp:
    """The server's ASGI app (uvicorn runs it). `host_names` None: answer to any Host header."""
    service = Service(core, engine)
    app = Starlette(routes=[
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/v1/chat/completions", service.chat_completions, methods=["POST"]),
    ])
    return app if host_names is None else HostCheck(app, host_names)
