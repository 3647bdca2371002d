"""How the window's turns take the window's own engine from the server's pool while the server
runs in the window: `borrow` (from the turn's worker thread) returns at once when the engine has
the turn's model loaded (the turn runs beside the API's requests, in a slot of its own), or waits
for the API requests on it to end when the turn must load another model; `give_back` (from any
thread) returns it once the reply has ended."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable

from app.serve.pool.engines import Lease
from app.serve.pool.pool import ModelPool
from models.library import InstalledModel


class WindowGate:
    def __init__(self, pool: ModelPool, loop: asyncio.AbstractEventLoop) -> None:
        # uvicorn runs the server on an asyncio loop: a turn reaches the pool through it.
        self.pool, self.loop = pool, loop

    def borrow(self, model: InstalledModel, cancelled: Callable[[], bool]) -> Lease | None:
        """The window's engine for a turn with `model` (blocking; the engine picks the slot that
        holds the turn's prefix). None when the turn was cancelled while
        waiting, or the server stopped (the engine is the window's alone again)."""
        try:
            future = asyncio.run_coroutine_threadsafe(self.pool.lease_window(model), self.loop)
        except RuntimeError:  # the loop is closed: the server stopped
            return None
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                if cancelled() or self.loop.is_closed():
                    future.cancel()  # the pool gives the engine back if it was granted meanwhile
                    return None
            except (concurrent.futures.CancelledError, RuntimeError):
                return None

    def give_back(self, lease: Lease) -> None:
        """The turn has ended: the engine goes back to the pool."""
        try:
            self.loop.call_soon_threadsafe(self.pool.release, lease)
        except RuntimeError:
            pass  # the server stopped meanwhile: there is no pool to give it back to
