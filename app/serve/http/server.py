"""The ASGI app of `cove serve` and the window's Server switch: the routes (under /v1, and the
OpenAI ones also without it, as llama-server answers them), the guards (the Host header against
DNS rebinding, app/serve/http/browser_guard.py against web pages), every error in the API's JSON shape
(an unknown route or method too), and the engine pool running for as long as the server does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.core import Core
from app.serve.api.anthropic_api import AnthropicApi, error_body
from app.serve.api.completions_api import CompletionsApi
from app.serve.api.count_tokens import TokenCounter
from app.serve.api.embeddings_api import EmbeddingsApi
from app.serve.api.openai_api import OpenAIApi
from app.serve.api.responses_api import ResponsesApi
from app.serve.api.service import Service
from app.serve.http.browser_guard import BrowserGuard
from app.serve.http.errors import error_response
from app.serve.http.http import LOOPBACK_NAMES, HostCheck
from app.serve.http.pairing import PATH as PAIR_PATH
from app.serve.http.pairing import PairingApi
from app.serve.pool.pool import ModelPool

__all__ = ["LOOPBACK_NAMES", "create_app"]


def create_app(
    core: Core, pool: ModelPool, *, host_names: Iterable[str] | None = LOOPBACK_NAMES, service: Service | None = None
) -> ASGIApp:
    """The server's ASGI app (uvicorn runs it). `host_names` None: answer to any Host header."""
    service = service or Service(core, pool)
    openai_api = OpenAIApi(service)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            async with pool.running():
                yield
        finally:
            await anyio.to_thread.run_sync(service.close)  # the store's last writes, on its own thread

    chat = openai_api.chat_completions
    embeddings = EmbeddingsApi(service).embeddings
    completions = CompletionsApi(service).completions
    responses = ResponsesApi(service).responses
    store = service.store.thread
    pair = PairingApi(store.run, lambda: store.history.db).pair  # the database is read on the store's thread
    app = Starlette(
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        routes=[
            Route("/v1/models", openai_api.models, methods=["GET"]),
            Route("/v1/models/{model:path}", openai_api.model, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/messages", AnthropicApi(service).messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", TokenCounter(service).count_tokens, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            # llama-server's paths without /v1, which some clients call.
            Route("/models", openai_api.models, methods=["GET"]),
            Route("/models/{model:path}", openai_api.model, methods=["GET"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/embeddings", embeddings, methods=["POST"]),
            Route("/completions", completions, methods=["POST"]),
            Route("/responses", responses, methods=["POST"]),
            # Another Cove redeems a pairing code here (app/serve/http/pairing.py); HTTPS only.
            Route(PAIR_PATH, pair, methods=["POST"]),
        ],
    )
    guarded = BrowserGuard(app)
    return guarded if host_names is None else HostCheck(guarded, host_names)


def is_anthropic(path: str) -> bool:
    """Whether errors at `path` take Anthropic's shape (the Messages API) rather than OpenAI's."""
    return path == "/v1/messages" or path.startswith("/v1/messages/")


def api_error(path: str, status: int, message: str) -> JSONResponse:
    """An error in the shape the API at `path` uses."""
    if is_anthropic(path):
        return JSONResponse(error_body(status, message), status_code=status)
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return error_response(status, message, kind, code="not_found" if status == 404 else None)


async def _http_error(request: Request, exc: Exception) -> Response:
    """An unknown route (404) or a method a route does not take (405), in the API's shape."""
    assert isinstance(exc, HTTPException)
    path, method = request.url.path, request.method
    if exc.status_code == 404:
        message = f"there is no {path} here (the API is under /v1: models, chat/completions, completions, embeddings, messages, responses)"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"{path} does not take {method}" + (f"; it takes {allowed}" if allowed else "")
    else:
        message = exc.detail
    response = api_error(path, exc.status_code, message)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _server_error(request: Request, exc: Exception) -> Response:
    """A failure of the server's own (its traceback is logged as well), in the API's shape."""
    return api_error(request.url.path, 500, f"the server failed on this request ({type(exc).__name__}); its log has the details")
