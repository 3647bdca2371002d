"""The pool's life on the server's event loop: `async with pool.running():` starts the clock that
unloads engines idle for longer than the TTL and lets engines load; on the way out every engine
process the pool started is stopped (the window's own is left to the window)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

import anyio
import anyio.abc

from app.serve.pool.engines import Engine


class ModelPool(Protocol):
    """What the clock needs of app/serve/pool/pool.py's ModelPool (which imports this module)."""

    ttl_s: float
    engines: list[Engine]
    closed: bool
    loop: asyncio.AbstractEventLoop | None
    tasks: anyio.abc.TaskGroup | None

    def unload(self, engine: Engine, why: str) -> Any: ...


async def unload_idle(pool: ModelPool) -> None:
    """Unload the pool's engines unused for longer than its TTL, checking a few times a TTL."""
    while True:
        await anyio.sleep(max(0.05, min(pool.ttl_s / 4, 5.0)))
        now = time.monotonic()
        for engine in [e for e in pool.engines if not e.busy and not e.loading and now - e.last_used > pool.ttl_s]:
            pool.unload(engine, f"unloaded {engine.model.name} after {pool.ttl_s:g} s idle")


class PoolRunning:
    def __init__(self, pool: ModelPool) -> None:
        self.pool = pool
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> ModelPool:
        self.pool.loop = asyncio.get_running_loop()  # uvicorn's: how the window's thread reaches the pool
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self.pool.tasks = self._group
        self._group.start_soon(unload_idle, self.pool)
        return self.pool

    async def __aexit__(self, *exc: object) -> None:
        pool = self.pool
        pool.closed = True
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        pool.tasks = None
        engines, pool.engines = pool.engines, []
        with anyio.CancelScope(shield=True):
            for engine in engines:
                await anyio.to_thread.run_sync(engine.client.close)
