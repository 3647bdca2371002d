"""The ASGI app of `cove serve` and the window's Server switch: the routes, the guards (the Host
header against DNS rebinding, app/serve/browser_guard.py against web pages), and the engine pool
running for as long as the server does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from app.core import Core
from app.serve.anthropic_api import AnthropicApi
from app.serve.browser_guard import BrowserGuard
from app.serve.completions_api import CompletionsApi
from app.serve.embeddings_api import EmbeddingsApi
from app.serve.http import LOOPBACK_NAMES, HostCheck
from app.serve.openai_api import OpenAIApi
from app.serve.pool import ModelPool
from app.serve.service import Service

__all__ = ["LOOPBACK_NAMES", "create_app"]


def create_app(core: Core, pool: ModelPool, *, host_names: Iterable[str] | None = LOOPBACK_NAMES,
               service: Service | None = None) -> ASGIApp:
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

    app = Starlette(lifespan=lifespan, routes=[
        Route("/v1/models", openai_api.models, methods=["GET"]),
        Route("/v1/chat/completions", openai_api.chat_completions, methods=["POST"]),
        Route("/v1/messages", AnthropicApi(service).messages, methods=["POST"]),
        Route("/v1/embeddings", EmbeddingsApi(service).embeddings, methods=["POST"]),
        Route("/v1/completions", CompletionsApi(service).completions, methods=["POST"]),
    ])
    guarded = BrowserGuard(app)
    return guarded if host_names is None else HostCheck(guarded, host_names)
