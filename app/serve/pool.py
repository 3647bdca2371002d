"""The engines behind the API: each installed model is loaded on demand in its own engine process
(up to `parallel` copies of one model), idle ones unload after a TTL or when a model that does not
fit next to them is asked for, and requests for a model wait in a queue that is fair across
clients. Each request goes to the idle copy whose cache holds the longest prefix of its prompt
("cache" routing) or to the next copy in turn ("round-robin"). Everything here runs on the
server's event loop; engines load and unload in worker threads."""

from __future__ import annotations

import itertools
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.engine.client import EngineClient, EngineError, LoadedModel
from app.load_options import LoadOptions
from app.serve import machine
from app.serve.errors import ApiError
from app.serve.machine import Footprint, estimated_footprint, gib
from models.library import InstalledModel

ROUTINGS = ("cache", "round-robin")
HELD_PER_ENGINE = 16  # conversations an engine's caches hold (its live KV cache and its RAM cache of states)
STICKY_WAITS = 3  # engine releases a request may wait through for the copy that holds its conversation
MEMORY_SHARE = 0.9  # of the RAM available when a model is loaded, what the pool lets itself use
UNKNOWN_WEIGHTS_FACTOR = 1.2  # a model whose estimate cannot be read: its file size and a fifth more


def prompt_key(messages: list[dict[str, Any]]) -> str:
    """The messages as one string whose common prefix with another stands for their common
    token prefix (the engine renders both through the same template)."""
    return "".join(f"\x1e{m.get('role', '')}\x1f{m.get('content', '')}" for m in messages)


def shared_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


@dataclass(eq=False)
class Engine:
    """One engine process with one model, as the pool sees it."""

    model: InstalledModel
    client: EngineClient
    index: int  # among the copies of its model: 0, 1, ...
    footprint: Footprint
    loading: bool = True
    busy: bool = False
    last_used: float = field(default_factory=time.monotonic)
    held: OrderedDict[str, None] = field(default_factory=OrderedDict)
    loaded: LoadedModel | None = None
    options: LoadOptions = field(default_factory=LoadOptions)  # the model's load settings, read when it was spawned

    def best_match(self, key: str) -> int:
        return max((shared_prefix(key, held) for held in self.held), default=0)

    def hold(self, key: str) -> None:
        self.held[key] = None
        self.held.move_to_end(key)
        while len(self.held) > HELD_PER_ENGINE:
            self.held.popitem(last=False)


@dataclass(eq=False)
class _Waiter:
    model: InstalledModel
    client: str
    key: str
    arrival: int
    ready: anyio.Event = field(default_factory=anyio.Event)
    engine: Engine | None = None
    error: ApiError | None = None
    window: bool = False  # the window, asking for its own engine
    skips: int = 0  # times it was left waiting for the busy copy that holds its conversation


@dataclass(frozen=True)
class LiveRequest:
    """A request the server is answering now, for the window's list."""

    id: int
    client: str
    model: str
    endpoint: str
    status: str  # "waiting", "loading", "running"
    tokens: int
    started: float


class Lease:
    """An engine lent to one request; give it back with `pool.release(lease, reply)`."""

    def __init__(self, engine: Engine, key: str) -> None:
        self.engine, self.key = engine, key

    @property
    def client(self) -> EngineClient:
        return self.engine.client


class ModelPool:
    def __init__(
        self,
        *,
        parallel: int = 1,
        routing: str = "cache",
        ttl_s: float = 600.0,
        n_ctx: int | None = None,
        options_of: Callable[[InstalledModel], LoadOptions] = lambda _m: LoadOptions(),
        engine_factory: Callable[[], EngineClient] = EngineClient,
        footprint_of: Callable[[InstalledModel, int | None], Footprint] | None = None,
        available_ram: Callable[[], int] | None = None,
        cache_ram_mb: int = 256,
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}")
        self.parallel, self.routing, self.ttl_s, self.n_ctx = max(1, parallel), routing, ttl_s, n_ctx
        self.cache_ram_mb = cache_ram_mb  # each engine's RAM cache of earlier conversations' KV state
        # options_of is called on the event loop's thread: the server's reads them off it beforehand.
        self._options_of, self._factory = options_of, engine_factory
        self._footprint_of = footprint_of or (lambda m, n_ctx: estimated_footprint(m, n_ctx, self._options_of(m).placement))
        self._available_ram = available_ram or machine.available_ram
        self.engines: list[Engine] = []
        self._waiters: list[_Waiter] = []
        self._served: dict[tuple[str, str], int] = {}  # (model path, client) -> when it was last served
        self._ticks = itertools.count()
        self._turn: dict[str, int] = {}  # round-robin: model path -> the copy that served last
        self._closed = False
        # The window's own engine, when the server runs in the window: lent to API requests for
        # the model it has loaded while the window does not use it; never unloaded by the pool.
        self.window_engine: Engine | None = None
        self.loop: Any = None  # the asyncio loop the pool runs on, once it runs
        self.events: list[str] = []  # what the pool did, for the window and the tests ("loaded X (copy 2)")

    # ---- the window's engine -----------------------------------------------------------

    def adopt(self, client: EngineClient) -> None:
        """Share the window's engine with API requests for the model it has loaded."""
        self.window_engine = Engine(_NO_MODEL, client, -1, Footprint(0, 0), loading=False)

    async def lease_window(self, model: InstalledModel, messages: list[dict[str, Any]]) -> Lease:
        """The window's own engine for one of its turns: it waits only for an API request
        that is using that engine now, ahead of every API request still waiting."""
        if self.window_engine is None:
            raise RuntimeError("the pool has no window engine (adopt() it first)")
        return await self._wait(_Waiter(model, "this window", prompt_key(messages), next(self._ticks), window=True))

    def _window_idle_for(self, path: str) -> Engine | None:
        engine = self.window_engine
        if engine is None or engine.busy or engine.client.busy:
            return None
        loaded = engine.client.loaded
        return engine if loaded is not None and loaded.path == path else None

    # ---- lending ----------------------------------------------------------------------

    async def lease(self, model: InstalledModel, client: str, messages: list[dict[str, Any]]) -> Lease:
        """Wait for an engine with `model` loaded, fairly among clients. Raises ApiError."""
        if self._closed:
            raise ApiError(503, "the server is stopping", "server_error")
        return await self._wait(_Waiter(model, client, prompt_key(messages), next(self._ticks)))

    async def _wait(self, waiter: _Waiter) -> Lease:
        self._waiters.append(waiter)
        try:
            self._dispatch(waiter.model.path)
            await waiter.ready.wait()
        except BaseException:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.engine is not None:  # handed an engine, but the request went away meanwhile
                self._give_back(waiter.engine)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.engine is not None
        return Lease(waiter.engine, waiter.key)

    def release(self, lease: Lease, reply_key: str | None = None, holds: int | None = None) -> None:
        """The request is done with its engine; `reply_key` is prompt_key of the messages and the
        reply (what the engine's cache now holds); `holds`, how many conversations the engine
        says its caches hold now (its RAM cache may keep fewer than HELD_PER_ENGINE)."""
        engine = lease.engine
        engine.hold(reply_key if reply_key is not None else lease.key)
        if holds is not None:
            while len(engine.held) > max(1, holds):
                engine.held.popitem(last=False)
        self._give_back(engine)

    def _give_back(self, engine: Engine) -> None:
        engine.busy = False
        engine.last_used = time.monotonic()
        if engine is self.window_engine and engine.client.loaded is not None and engine.client.loaded.path != engine.model.path:
            engine.held.clear()  # the window loaded another model meanwhile
        self._dispatch(engine.model.path)
        for path in {w.model.path for w in self._waiters} - {engine.model.path}:
            self._dispatch(path)  # a request waiting for memory may fit now that this engine can be unloaded

    def waiting(self) -> int:
        return len(self._waiters)

    # ---- choosing ---------------------------------------------------------------------

    def _dispatch(self, path: str) -> None:
        own = self.window_engine
        window = next((w for w in self._waiters if w.window), None)
        if window is not None and own is not None and not own.busy:
            self._waiters.remove(window)
            own.model, own.busy, own.last_used = window.model, True, time.monotonic()
            window.engine = own
            window.ready.set()
        skipped: set[int] = set()  # requests left waiting for their busy copy in this call
        while True:
            waiters = [w for w in self._waiters if w.model.path == path and not w.window]
            if not waiters:
                return
            idle = [e for e in self.engines if e.model.path == path and not e.busy and not e.loading]
            if (lent := self._window_idle_for(path)) is not None:
                idle.append(lent)
            copies = [e for e in self.engines if e.model.path == path]
            loading = sum(e.loading for e in copies)
            wanted = len(waiters) > len(idle) + loading and len(copies) < self.parallel
            if wanted and not self._spawn(waiters[0].model, len(copies)) and not copies:
                return  # waits for memory: another model's request ends and frees it
            if not idle:
                return
            if self.routing == "cache":
                busy = [e for e in copies if e.busy] + ([own] if own is not None and own.busy else [])
                pair = self._cache_pick(waiters, idle, busy, skipped)
                if pair is None:
                    return  # each waiting request waits for the copy that holds its conversation
                waiter, engine = pair
            else:
                waiter = self._next_fair(waiters)
                engine = self._choose(idle, waiter.key, path)
            self._waiters.remove(waiter)
            engine.busy = True
            engine.last_used = time.monotonic()
            self._served[(path, waiter.client)] = next(self._ticks)
            waiter.engine = engine
            waiter.ready.set()

    def _cache_pick(self, waiters: list[_Waiter], idle: list[Engine], busy: list[Engine],
                    skipped: set[int]) -> tuple[_Waiter, Engine] | None:
        """Cache routing: the fairest request goes to the idle copy whose caches share the
        longest prefix with it; but a request whose conversation a busy copy holds, by more
        than half of it, waits for that copy (evaluating it again elsewhere would cost more than
        the wait), at most STICKY_WAITS times, and the next fairest request goes first."""
        for waiter in self._fair_order(waiters):
            here = max(idle, key=lambda e: (e.best_match(waiter.key), -e.last_used))
            there = max((e.best_match(waiter.key) for e in busy), default=0)
            if there > here.best_match(waiter.key) + len(waiter.key) // 2 and waiter.skips < STICKY_WAITS:
                if waiter.arrival not in skipped:
                    skipped.add(waiter.arrival)
                    waiter.skips += 1
                continue
            return waiter, here
        return None

    def _fair_order(self, waiters: list[_Waiter]) -> list[_Waiter]:
        """Each client's oldest request, the client served longest ago first."""
        heads: dict[str, _Waiter] = {}
        for w in sorted(waiters, key=lambda w: w.arrival):
            heads.setdefault(w.client, w)
        path = waiters[0].model.path
        return sorted(heads.values(), key=lambda w: (self._served.get((path, w.client), -1), w.arrival))

    def _next_fair(self, waiters: list[_Waiter]) -> _Waiter:
        """The oldest request of the client served longest ago (never served: first)."""
        return self._fair_order(waiters)[0]

    def _choose(self, idle: list[Engine], key: str, path: str) -> Engine:
        if self.routing == "round-robin":
            last = self._turn.get(path, -1)
            engine = min(idle, key=lambda e: ((e.index - last - 1) % self.parallel))
            self._turn[path] = engine.index
            return engine
        return max(idle, key=lambda e: (e.best_match(key), -e.last_used))

    # ---- loading and unloading --------------------------------------------------------

    def _spawn(self, model: InstalledModel, index: int) -> bool:
        """Start loading another copy of `model` if memory allows (unloading idle engines of
        other models, least recently used first). False when it does not fit now."""
        try:
            footprint = self._footprint_of(model, self.n_ctx)
        except Exception as exc:  # noqa: BLE001 - a file that cannot be read: the load itself will say why
            footprint = Footprint(int(model.size * UNKNOWN_WEIGHTS_FACTOR), 0)
            self.events.append(f"no memory estimate for {model.name}: {exc}")
        shares = any(e.model.path == model.path for e in self.engines)
        need = footprint.per_engine + (0 if shares else footprint.weights)
        # What the system reports free, less what engines still loading will take.
        loading = sum(e.footprint.per_engine for e in self.engines if e.loading)
        free = int(self._available_ram() * MEMORY_SHARE) - loading
        evict = sorted((e for e in self.engines if not e.busy and not e.loading and e.model.path != model.path),
                       key=lambda e: e.last_used)
        chosen: list[Engine] = []
        while need > free and evict:
            victim = evict.pop(0)
            chosen.append(victim)
            last_copy = not any(e.model.path == victim.model.path for e in self.engines if e not in chosen)
            free += victim.footprint.per_engine + (victim.footprint.weights if last_copy else 0)
        if need > free:
            busy_elsewhere = any(e.model.path != model.path and (e.busy or e.loading) for e in self.engines)
            if not shares and not busy_elsewhere:
                self._fail(model.path, ApiError(
                    507, f"{model.name} needs about {gib(need)} of RAM and {gib(free)} is free for it "
                         "(with every other model unloaded)", "server_error", code="insufficient_memory"))
            return False
        for victim in chosen:
            self._unload(victim, f"unloaded {victim.model.name} to make room for {model.name}")
        engine = Engine(model, self._factory(), index, footprint, options=self.load_options(model))
        self.engines.append(engine)
        self.events.append(f"loading {model.name}" + (f" (copy {index + 1})" if index else ""))

        async def load() -> None:
            try:
                engine.loaded = await anyio.to_thread.run_sync(self.load, engine)
            except EngineError as exc:
                self.engines.remove(engine)
                await anyio.to_thread.run_sync(engine.client.close)
                if not any(e.model.path == model.path for e in self.engines):
                    self._fail(model.path, ApiError(500, f"{model.name} could not be loaded: {exc}", "server_error"))
                return
            engine.loading = False
            engine.last_used = time.monotonic()
            self.events.append(f"loaded {model.name}" + (f" (copy {index + 1})" if index else ""))
            self._dispatch(model.path)

        self._task_group().start_soon(load)
        return True

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
        """Load `engine`'s model with the pool's settings and the model's own (blocking; at once
        when it is loaded with them already). Every request loads through this, so none loads it
        again otherwise. Runs in a worker thread: it uses the options read when the engine was made."""
        return engine.client.load(engine.model.path, n_ctx=self.n_ctx, n_threads=self.threads_per_engine(),
                                  state_cache_mb=self.cache_ram_mb, **engine.options.load_arguments())

    def threads_per_engine(self) -> int | None:
        """Copies of a model run at once, so they share the cores: llama.cpp's threads wait for
        each other after every operation, and more threads than cores stall them all (None: the
        engine's own default, every physical core)."""
        if self.parallel == 1:
            return None
        return max(1, machine.physical_cores() // self.parallel)

    def _fail(self, path: str, error: ApiError) -> None:
        for waiter in [w for w in self._waiters if w.model.path == path]:
            self._waiters.remove(waiter)
            waiter.error = error
            waiter.ready.set()

    def _unload(self, engine: Engine, why: str) -> None:
        self.engines.remove(engine)
        self.events.append(why)
        self._task_group().start_soon(anyio.to_thread.run_sync, engine.client.close)

    # ---- running ----------------------------------------------------------------------

    _tasks: anyio.abc.TaskGroup | None = None

    def _task_group(self) -> anyio.abc.TaskGroup:
        if self._tasks is None:
            raise RuntimeError("the pool is not running (use `async with pool.running():`)")
        return self._tasks

    def running(self) -> _Running:
        return _Running(self)

    async def _expire(self) -> None:
        """Unload engines idle for longer than the TTL."""
        while True:
            await anyio.sleep(max(0.05, min(self.ttl_s / 4, 5.0)))
            now = time.monotonic()
            for engine in [e for e in self.engines if not e.busy and not e.loading and now - e.last_used > self.ttl_s]:
                self._unload(engine, f"unloaded {engine.model.name} after {self.ttl_s:g} s idle")

    def loaded(self) -> list[Engine]:
        return list(self.engines)


class _Running:
    """`async with pool.running():` starts the TTL clock and lets engines load; on the way out
    every engine process is stopped."""

    def __init__(self, pool: ModelPool) -> None:
        self.pool = pool
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> ModelPool:
        import asyncio

        self.pool.loop = asyncio.get_running_loop()  # uvicorn's: how the window's thread reaches the pool
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self.pool._tasks = self._group
        self._group.start_soon(self.pool._expire)
        return self.pool

    async def __aexit__(self, *exc: object) -> None:
        pool = self.pool
        pool._closed = True
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        pool._tasks = None
        engines, pool.engines = pool.engines, []
        with anyio.CancelScope(shield=True):
            for engine in engines:
                await anyio.to_thread.run_sync(engine.client.close)


_NO_MODEL = InstalledModel(name="", path="", sha256="", size=0, mtime=0.0, quant=None, architecture=None,
                           parameter_count=None, context_length=None, has_chat_template=False, source="imported",
                           repo=None, file=None, revision=None, added_at="", last_used_at=None)
