"""The engines behind the API: each installed model is loaded on demand in one engine process
with `parallel` slots, so up to that many requests for it run at once (the engine batches them
and picks for each the slot whose cache holds the longest prefix of its prompt); more wait in a
queue fair across clients (app/serve/pool/fair_queue.py). Idle engines unload after a TTL
(app/serve/pool/idle_ttl.py) or when a model that does not fit beside them is asked for
(app/serve/pool/memory_fit.py); the window's own engine is shared with the API while the server runs
in the window (app/serve/pool/window_share.py). Everything here runs on the server's event loop;
engines load and unload in worker threads."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from app.engine.client import EngineClient, EngineError, LoadedModel
from app.engine.loaded import file_stamp
from app.load_options import LoadOptions
from app.serve.http.errors import ApiError
from app.serve.pool.engines import Engine, Lease
from app.serve.pool.fair_queue import FairQueue, Waiter
from app.serve.pool.idle_ttl import PoolRunning
from app.serve.pool.live_request import LiveRequest
from app.serve.pool.machine import Footprint, gib
from app.serve.pool.memory_fit import MemoryFit, estimate, fitting_slots
from app.serve.pool.window_share import WindowShare
from models.library import InstalledModel

__all__ = ["Lease", "LiveRequest", "ModelPool"]


class ModelPool:
    def __init__(
        self,
        *,
        parallel: int | None = None,
        ttl_s: float = 600.0,
        n_ctx: int | None = None,
        options_of: Callable[[InstalledModel], LoadOptions] = lambda _m: LoadOptions(),
        engine_factory: Callable[[], EngineClient] = EngineClient,
        footprint_of: Callable[[InstalledModel], Footprint] | None = None,
        available_ram: Callable[[], int] | None = None,
        cache_ram_mb: int = 256,
        default_slots: Callable[[InstalledModel], int] | None = None,
    ) -> None:
        # parallel: the slots of each engine (None: as many as fit, model by model: default_slots).
        self.parallel, self.ttl_s, self.n_ctx = (None if parallel is None else max(1, parallel)), ttl_s, n_ctx
        self.cache_ram_mb = cache_ram_mb  # each engine's RAM cache of earlier conversations' KV state
        # options_of is called on the event loop's thread: the server's reads them off it beforehand.
        self._options_of, self._factory = options_of, engine_factory
        self._default_slots = default_slots or (lambda m: fitting_slots(m, self.n_ctx, self._options_of(m).placement))
        self.fit = MemoryFit(
            footprint_of or (lambda m: estimate(m, self.n_ctx, self._options_of(m).placement, self.slots_for(m))), available_ram
        )
        self.engines: list[Engine] = []
        self.queue = FairQueue()
        self.window: WindowShare | None = None  # the window's own engine, when the server runs in the window
        self.closed = False
        self.tasks: anyio.abc.TaskGroup | None = None  # while running: where engines load
        self.loop: Any = None  # the asyncio loop the pool runs on, once it runs
        self.events: list[str] = []  # what the pool did, for the window and the tests ("loaded X")

    def slots_for(self, model: InstalledModel) -> int:
        """The slots `model`'s engine is started with: `parallel`, or as many as fit."""
        if self.parallel is not None:
            return self.parallel
        try:
            return max(1, self._default_slots(model))
        except Exception:  # noqa: BLE001 - a file that cannot be read: one slot; the load says what is wrong
            return 1

    # ---- the window's engine -----------------------------------------------------------

    def adopt(self, client: EngineClient, window_first: Callable[[], bool] = lambda: True) -> None:
        """Share the window's engine with API requests for the model it has loaded (`window_first`:
        whether one of its slots is kept for the window's turn, read as each request starts)."""
        self.window = WindowShare(client, window_first)

    @property
    def window_engine(self) -> Engine | None:
        return self.window.engine if self.window is not None else None

    async def lease_window(self, model: InstalledModel) -> Lease:
        """The window's own engine for one of its turns: beside the API's requests when it has
        `model` loaded, ahead of every API request still waiting; alone when it must load it."""
        share = self.window
        if share is None:
            raise RuntimeError("the pool has no window engine (adopt() it first)")
        waiter = share.waiter = Waiter(model, "this window", -1)
        try:
            self._dispatch_all()
            await waiter.ready.wait()
        except BaseException:
            if share.waiter is waiter:
                share.waiter = None
                self._dispatch_all()  # API requests it held back may start
            elif waiter.lease is not None:  # handed the engine, but the turn went away meanwhile
                self.release(waiter.lease)
            raise
        assert waiter.lease is not None
        return waiter.lease

    # ---- lending ----------------------------------------------------------------------

    async def lease(self, model: InstalledModel, client: str, *, exclusive: bool = False) -> Lease:
        """Wait for a slot of an engine with `model` loaded, fairly among clients (`exclusive`:
        the engine alone, for embeddings). Raises ApiError."""
        if self.closed:
            raise ApiError(503, "the server is stopping", "server_error")
        waiter = self.queue.join(model, client, exclusive=exclusive)
        try:
            self._dispatch(model.path)
            await waiter.ready.wait()
        except BaseException:
            if not self.queue.leave(waiter) and waiter.lease is not None:
                self.release(waiter.lease)  # handed an engine, but the request went away meanwhile
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.lease is not None
        return waiter.lease

    def release(self, lease: Lease) -> None:
        """The request (or the window's turn) is done with its engine."""
        if lease.released:
            return
        lease.released = True
        if lease.window and self.window is not None:
            self.window.end_turn(lease)
        else:
            lease.engine.give_back()
        self._dispatch_all()  # a slot is free; a request waiting for memory may fit now

    def waiting(self) -> int:
        return len(self.queue) + (1 if self.window is not None and self.window.waiter is not None else 0)

    def loaded(self) -> list[Engine]:
        return list(self.engines)

    # ---- choosing ---------------------------------------------------------------------

    def _dispatch_all(self) -> None:
        if self.window is not None:
            self.window.grant_turn()  # the window first
        for path in self.queue.paths():
            self._dispatch(path)

    def _dispatch(self, path: str) -> None:
        """Lend free slots of `path`'s engine to its waiting requests, the fairest first; start
        the engine when there is none (memory allowing)."""
        while (waiter := self.queue.next_for(path)) is not None:
            engine = self._free_engine(path, waiter.exclusive)
            if engine is None:
                if not self._serves(path):
                    self._spawn(waiter.model)
                return  # the fairest waits for a slot, and the others behind it
            engine.take(waiter.exclusive)
            self.queue.grant(waiter, Lease(engine, exclusive=waiter.exclusive))

    def _free_engine(self, path: str, exclusive: bool) -> Engine | None:
        for engine in self.engines:
            if engine.model.path == path and engine.can_take(exclusive):
                return engine
        share = self.window
        return share.engine if share is not None and share.takes(path, exclusive) else None

    def _serves(self, path: str) -> bool:
        """An engine has (or is loading) `path` for the API: a request for it waits for a slot."""
        return any(e.model.path == path for e in self.engines) or (self.window is not None and self.window.lends(path))

    # ---- loading and unloading --------------------------------------------------------

    def _spawn(self, model: InstalledModel) -> None:
        """Start loading `model` if memory allows (unloading idle engines of other models, least
        recently used first); its requests fail with the figures when it can never fit."""
        footprint, note = self.fit.footprint(model)
        if note:
            self.events.append(note)
        room = self.fit.room(model, footprint, self.engines)
        if not room.fits:
            if not any(e.busy or e.loading for e in self.engines):  # nothing will free memory later
                self.queue.fail(
                    model.path,
                    ApiError(
                        507,
                        f"{model.name} needs about {gib(room.need)} of RAM and {gib(room.free)} is free for it "
                        "(with every other model unloaded)",
                        "server_error",
                        code="insufficient_memory",
                    ),
                )
            return  # waits for memory: another model's request ends and frees it
        for victim in room.victims:
            self.unload(victim, f"unloaded {victim.model.name} to make room for {model.name}")
        slots = self.slots_for(model)
        engine = Engine(model, self._factory(), footprint, slots=slots, options=self.load_options(model))
        self.engines.append(engine)
        self.events.append(f"loading {model.name}" + (f" ({slots} slots)" if slots > 1 else ""))

        async def load() -> None:
            try:
                engine.loaded = await anyio.to_thread.run_sync(self.load, engine)
            except EngineError as exc:
                self.engines.remove(engine)
                await anyio.to_thread.run_sync(engine.client.close)
                self.queue.fail(model.path, ApiError(500, f"{model.name} could not be loaded: {exc}", "server_error"))
                return
            engine.loading = False
            engine.slots = max(1, engine.loaded.slots)  # the slots the host made
            engine.last_used = time.monotonic()
            self.events.append(f"loaded {model.name}")
            self._dispatch(model.path)

        self._task_group().start_soon(load)

    def read_options_with(self, options_of: Callable[[InstalledModel], LoadOptions]) -> None:
        """Where the pool reads a model's load settings from from now on (the server's service,
        which reads them off the event loop before it asks for an engine)."""
        self._options_of = options_of

    def load_options(self, model: InstalledModel) -> LoadOptions:
        """`model`'s load settings (`options_of`, on the event loop's thread); a draft model that
        is gone is left out, and the pool's events say so."""
        options = self._options_of(model)
        if options.notice and options.notice not in self.events[-20:]:
            self.events.append(options.notice)
        return options

    def load(self, engine: Engine) -> LoadedModel:
        """Load `engine`'s model with the pool's settings and the model's own (blocking), with
        `parallel` slots. Every request loads through this: at once, without asking the engine
        (other replies run on it), while its file is the one loaded. Runs in a worker thread: it
        uses the options read when the engine was made."""
        path = engine.model.path
        current = engine.client.loaded
        if engine.loaded is not None and current is not None and current.path == path and file_stamp(path) == engine.stamp:
            return current
        engine.stamp = file_stamp(path)
        arguments = engine.options.load_arguments()
        arguments["parallel"] = engine.slots
        return engine.client.load(path, n_ctx=self.n_ctx, state_cache_mb=self.cache_ram_mb, **arguments)

    def unload(self, engine: Engine, why: str) -> None:
        self.engines.remove(engine)
        self.events.append(why)
        self._task_group().start_soon(anyio.to_thread.run_sync, engine.client.close)

    # ---- running ----------------------------------------------------------------------

    def _task_group(self) -> anyio.abc.TaskGroup:
        if self.tasks is None:
            raise RuntimeError("the pool is not running (use `async with pool.running():`)")
        return self.tasks

    def running(self) -> PoolRunning:
        return PoolRunning(self)
