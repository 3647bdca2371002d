"""What every endpoint shares: who is asking (the key's name), which installed model a name means,
running one reply on an engine lent by the pool, and entering each request in the written record
and the history from its acceptance to its end (app/serve/request_store.py). Runs on the server's
event loop thread, which opened the history database."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, cast

import anyio
from starlette.requests import Request

from app.chat import start_generation
from app.core import Core
from app.engine.client import EngineClient, EngineError
from app.engine.generation import FinishedEvent, Generation, TokenEvent
from app.engine.loaded import Embeddings
from app.load_options import LoadOptions, load_options
from app.serve.errors import ApiError
from app.serve.peer_owner import is_this_account
from app.serve.pool import Lease, LiveRequest, ModelPool, prompt_key
from app.serve.request_store import Opened, RequestStore, StoreThread
from app.settings import SamplingParams
from app.store.statuses import MessageStatus
from app.tools.reply import ToolReply, ToolsEngine, record_of, reply_of
from app.tools.spec import ToolSet
from models.library import FileRecheck, InstalledModel, ModelNotFound

CLIENT = "local API"  # the record's client for a loopback request while no key is made


@dataclass(frozen=True)
class Job:
    """One reply an endpoint asks for."""

    endpoint: str
    model: InstalledModel
    messages: list[dict[str, Any]]
    params: SamplingParams
    stop: tuple[str, ...] = ()
    stream: bool = False
    grammar: str | None = None
    raw_prompt: str | None = None  # a text completion (/v1/completions): no chat template
    record_params: dict[str, Any] = field(default_factory=dict)  # more settings the record keeps (e.g. response_format)
    tools: ToolSet | None = None  # the tools the model may call (app/tools/)
    call_id_prefix: str = "call_"  # how the ids of the reply's tool calls begin (Anthropic's: "toolu_")


def failure_error(finished: FinishedEvent) -> ApiError:
    """The error a reply that ended as an error is answered with: a prompt larger than the
    context is the client's (400, with the numbers), anything else the server's."""
    failure = finished.failure
    if failure is not None and failure.kind == "context" and failure.n_ctx:
        size = f"at least {failure.prompt_tokens:,}" if failure.at_least else f"{failure.prompt_tokens:,}"
        return ApiError(400, f"This model's maximum context length is {failure.n_ctx:,} tokens; your messages are {size} "
                             f"tokens, and {failure.reserve or 0:,} are kept for the reply. Shorten the messages or "
                             "lower max_tokens.", param="messages", code="context_length_exceeded")
    if failure is not None and failure.kind == "grammar":
        param = "tools" if (finished.error or "").startswith("the tools") else "response_format"
        return ApiError(400, finished.error or "the response_format cannot be enforced", param=param)
    return ApiError(500, finished.error or "the engine stopped without a reply", "server_error")


CHUNK_INTERVAL_S = 0.02  # a stream sends at most one chunk this often; tokens arriving faster are joined


# A token of any vocabulary spans at most this many characters (the longest are runs of spaces or
# punctuation, well under 100): a prompt longer than the context times this cannot fit.
MAX_CHARS_PER_TOKEN = 256
UNKNOWN_CONTEXT = 131_072  # the context bound for a model whose file does not say its own


def refuse_what_cannot_fit(job: Job, n_ctx: int | None) -> None:
    """Refuse, before anything is written or an engine waited for, a request that surely cannot
    fit the model's context: more messages than the context has tokens (each takes one at least),
    or more characters than its tokens could span. What may fit is measured by the engine."""
    context = max(n_ctx or 0, job.model.context_length or 0) or UNKNOWN_CONTEXT
    texts = [job.raw_prompt] if job.raw_prompt is not None else [str(m.get("content") or "") for m in job.messages]
    if len(texts) > context:
        raise ApiError(400, f"This model's maximum context length is {context:,} tokens, and your request has "
                            f"{len(texts):,} messages, each at least one token. Send fewer messages.", param="messages",
                       code="context_length_exceeded")
    chars = sum(len(t) for t in texts)
    if chars > context * MAX_CHARS_PER_TOKEN:
        raise ApiError(400, f"This model's maximum context length is {context:,} tokens, and your request has "
                            f"{chars:,} characters, more than that many tokens can hold. Shorten the messages.",
                       param="messages", code="context_length_exceeded")


def unsaved_sentence(why: str) -> str:
    """What a client is told of a reply the history file could not take yet."""
    return (f"This reply is not in Cove's history yet ({why}); Cove keeps it and writes it, with the request's "
            "record entry, as soon as the file takes it.")


class Running:
    """One reply in progress: `await next()` gives its events, None after the last. Tokens that
    arrived together come as one event, and a stream faster than one token per CHUNK_INTERVAL_S
    sends what arrived meanwhile as one chunk: the server's work per chunk runs in the window's
    process when the Server switch is on, and a thousand chunks a second would take the window's
    main thread its turns at the interpreter. The first token goes out at once."""

    def __init__(self, generation: Generation) -> None:
        self.generation = generation
        self.finished: FinishedEvent | None = None
        self.text: list[str] = []
        self.tokens = 0  # tokens so far (events before they were joined)
        self._ready: deque[TokenEvent | FinishedEvent] = deque()
        self._last_chunk = 0.0
        self._arrived: asyncio.Event | None = None
        # A stream's reply is closed (engine given back, request recorded) as soon as its last
        # event is taken, before the stream's last chunks go out: a client that sends its next
        # request on [DONE] never waits behind this one's commit.
        self.close_early: Callable[[], Awaitable[None]] | None = None
        # Given the reply so far after each event of text, to save it (cheap unless a save is due).
        self.on_text: Callable[[list[str]], None] | None = None
        # Set when the reply ended: why it is not (yet) in the history file, None when it is.
        self.not_saved: str | None = None
        # Set when a reply with tools ended: its calls as read once, for the record and the endpoint.
        self.tool_reply: ToolReply | None = None

    async def next(self) -> TokenEvent | FinishedEvent | None:
        if self.finished is not None:
            return None
        ready = self._ready
        if not ready:
            ready.extend(self.generation.take_ready())
        while not ready:  # wait for the engine's next event on the loop, with no thread blocked
            wake, arrived = self._waker()
            armed = self.generation.wake_when_ready(wake)
            if armed:
                await arrived.wait()
                arrived.clear()
            ready.extend(self.generation.take_ready())
            if not armed and not ready:
                break
        if ready and isinstance(ready[0], TokenEvent):
            early = self._last_chunk + CHUNK_INTERVAL_S - time.perf_counter()
            if early > 0:
                await anyio.sleep(early)
                ready.extend(self.generation.take_ready())
            self._last_chunk = time.perf_counter()
        event = ready.popleft() if ready else None
        if isinstance(event, TokenEvent):
            self.tokens += 1
            if ready and isinstance(ready[0], TokenEvent):
                parts = [event.text]
                while ready and isinstance(ready[0], TokenEvent):
                    parts.append(ready.popleft().text)
                    self.tokens += 1
                event = TokenEvent("".join(parts), event.t)
            self.text.append(event.text)
            if self.on_text is not None:
                self.on_text(self.text)
        elif isinstance(event, FinishedEvent):
            self.finished = event
        else:
            self.finished = FinishedEvent("".join(self.text), MessageStatus.ERROR, {}, "the engine stopped without a reply")
        if self.finished is not None and self.close_early is not None:
            close, self.close_early = self.close_early, None
            await close()
        return event if event is not None else self.finished

    def _waker(self) -> tuple[Callable[[], None], asyncio.Event]:
        """What the engine's reader thread calls when an event arrives: set `_arrived` on this
        loop. A loop already closed (the server stopped) is no one's to wake."""
        loop = asyncio.get_running_loop()
        if self._arrived is None:
            self._arrived = asyncio.Event()
        arrived = self._arrived

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(arrived.set)
            except RuntimeError:
                pass

        return wake, arrived

    async def whole(self) -> FinishedEvent:
        while await self.next() is not None:
            pass
        assert self.finished is not None
        return self.finished


class Service:
    def __init__(self, core: Core, pool: ModelPool) -> None:
        self.core, self.pool = core, pool
        # Every write about a request runs on the store's own thread and connection, off the event loop.
        self.store = RequestStore(StoreThread(core.paths.database, core.paths.models_dir, core.paths.kv_states_dir))
        self._options: dict[str, LoadOptions] = {}  # model path -> its load settings, read on the store's thread
        pool.read_options_with(self.options_of)
        self._ids = itertools.count(1)
        self._live: dict[int, tuple[LiveRequest, Running | None]] = {}
        self._live_lock = threading.Lock()  # the window reads the list from its own thread
        self.stopping = False

    def stop_all(self) -> None:
        """The server is stopping (any thread): replies in progress end as cancelled within a
        token, so they are recorded and their clients told; requests still waiting are refused."""
        self.stopping = True
        with self._live_lock:
            running = [r for _row, r in self._live.values() if r is not None]
        for reply in running:
            reply.generation.cancel()

    def close(self) -> None:
        """The server has stopped (not on the event loop): the store's last writes, then its thread."""
        self.store.stop()
        self.store.thread.close()

    def live(self) -> list[LiveRequest]:
        """The requests being answered now, oldest first (any thread)."""
        with self._live_lock:
            rows = list(self._live.values())
        return [replace(row, tokens=running.tokens) if running else row for row, running in rows]

    def _set_live(self, live_id: int, row: LiveRequest | None, running: Running | None = None) -> None:
        with self._live_lock:
            if row is None:
                self._live.pop(live_id, None)
            else:
                self._live[live_id] = (row, running)

    async def client(self, request: Request) -> str:
        """Who is asking: the name of the key the request carries (Authorization: Bearer, or
        x-api-key). Without any key made, a request from a program of the person's own account
        is the "local API", and one from another account on this computer is refused."""
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "").strip()
        keys = self.store.thread.keys
        any_key, name = await self.store.thread.run(lambda: (bool(keys.names()), keys.name_of(key) if key else None))
        if not any_key:
            if is_this_account(request.scope.get("client"), request.scope.get("server")) is False:
                raise ApiError(403, "this server answers only the programs of the account that runs Cove; "
                                    "for another account, make it a key (cove serve keys add NAME)", "permission_error",
                               code="another_account")
            return CLIENT
        if name is None:
            raise ApiError(401, "a valid API key is needed (cove serve keys add NAME makes one)", "authentication_error",
                           code="invalid_api_key")
        return name

    async def models(self) -> list[InstalledModel]:
        """The installed models (read on the store's thread)."""
        return await self.store.thread.run(self.store.thread.library.list)

    async def model(self, name: str) -> InstalledModel:
        """The installed model `name` means: its name, or its file's name without .gguf, or its
        Hugging Face repo when one model came from it; letter case aside."""
        found = await self.store.thread.run(self._model_now, name)
        if found is None:
            raise ApiError(404, f"the model '{name}' is not installed here (GET /v1/models lists them)",
                           code="model_not_found", param="model")
        return found

    def _model_now(self, name: str) -> InstalledModel | None:
        library = self.store.thread.library
        try:
            return library.get(name)
        except ModelNotFound:
            pass
        wanted = name.strip().lower().removesuffix(".gguf")
        models = library.list()
        for alias in (lambda m: m.name, lambda m: (m.file or m.path).rsplit("/", 1)[-1].removesuffix(".gguf"),
                      lambda m: m.repo or ""):
            found = [m for m in models if alias(m).lower().removesuffix(".gguf") == wanted]
            if len(found) == 1:
                return found[0]
        return None

    async def load_options(self, model: InstalledModel) -> LoadOptions:
        """`model`'s load settings, its draft model looked up in the library on the store's
        thread; the pool spawns its engines with them (options_of) and says a missing draft."""
        library = self.store.thread.library
        options = await self.store.thread.run(load_options, library, model, self.core.settings.placement_for(model.name))
        self._options[model.path] = options
        return self.pool.load_options(model)

    def options_of(self, model: InstalledModel) -> LoadOptions:
        """The pool's source of load settings: those read last for `model` (no SQLite here, on
        the event loop), or its placement alone before any were read."""
        return self._options.get(model.path) or LoadOptions(self.core.settings.placement_for(model.name))

    async def open_reply(self, request: Request, job: Job) -> tuple[Running, Callable[[], Awaitable[None]]]:
        """`reply` entered by hand, for a response that outlives the endpoint's call (a stream):
        call the returned close once, however the response ends. Raises ApiError."""
        stack = AsyncExitStack()
        running = await stack.enter_async_context(self.reply(request, job))
        running.close_early = stack.aclose
        return running, stack.aclose

    async def open_stream(self, request: Request, job: Job) -> tuple[Running, Callable[[], Awaitable[None]],
                                                                       TokenEvent | FinishedEvent | None]:
        """`open_reply` and the reply's first event: a stream's status is known there, so a reply
        that cannot start (a prompt larger than the context, a grammar refused) raises ApiError,
        closed already, and becomes an error response rather than a stream."""
        running, close = await self.open_reply(request, job)
        try:
            first = await running.next()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await close()
            raise
        if isinstance(first, FinishedEvent) and first.status == MessageStatus.ERROR and not running.text:
            await close()
            raise failure_error(first)
        return running, close, first

    @asynccontextmanager
    async def reply(self, request: Request, job: Job) -> AsyncIterator[Running]:
        """Enter the request (the record, the history) as it is accepted, lend an engine with the
        job's model, start the reply, and give its events, checkpointing the text as it streams.
        However it ends (finished, failed, the client gone), the engine is given back and the
        request is closed in the record and the history once. Raises ApiError before the reply
        starts (entered as an error)."""
        refuse_what_cannot_fit(job, self.pool.n_ctx)
        client = request.scope.get("cove.client", CLIENT)
        live_id = next(self._ids)
        waiting = LiveRequest(live_id, client, job.model.name, job.endpoint, "waiting", 0, time.time())
        self._set_live(live_id, waiting)
        opened = await self._open(request, job, conversation=True)
        running: Running | None = None
        try:
            try:
                options = await self.load_options(job.model)  # read before the pool may spawn an engine with them
                lease = await self.pool.lease(job.model, client, job.messages)
            except ApiError as exc:
                await self._close(opened, reply="", status=MessageStatus.ERROR, metrics={}, error=exc.message)
                raise
            try:
                if self.stopping:
                    raise ApiError(503, "the server is stopping", "server_error")
                generation, recheck = await anyio.to_thread.run_sync(self._start, lease, job, options)
                if recheck is not None:  # the file changed under the server: the record names the one that runs
                    library = self.store.thread.library
                    job = replace(job, model=await self.store.thread.run(library.record_recheck, job.model.name, recheck))
            except ApiError as exc:
                self.pool.release(lease)
                await self._close(opened, reply="", status=MessageStatus.ERROR, metrics={}, error=exc.message)
                raise
            running = Running(generation)
            running.on_text = lambda parts: self.store.checkpoint(opened, parts)
            self._set_live(live_id, replace(waiting, status="running"), running)
            try:
                yield running
            finally:
                if running.finished is None:  # the client went away: stop the engine, let it finish first
                    generation.cancel()
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(lambda: [None for _ in generation])
                    end = generation.finished
                    running.finished = FinishedEvent(end.text if end else "".join(running.text), MessageStatus.CANCELLED,
                                                     end.metrics if end else {}, None)
                done = running.finished
                reply_messages = [*job.messages, {"role": "assistant", "content": done.text}]
                cached = done.metrics.get("state_cache") or {}
                # The host's RAM cache held `entries` before saving this reply: one more now, at most.
                # Without a RAM cache it holds the live KV cache's one conversation.
                holds = (int(cached.get("entries") or 0) + 1 if cached.get("enabled") else 1) if cached else None
                self.pool.release(lease, prompt_key(reply_messages), holds)
                if job.tools is not None and job.tools.active and done.status != MessageStatus.ERROR:
                    running.tool_reply = reply_of(job.tools, done.metrics, done.text, job.call_id_prefix)
                await self._close(opened, reply=done.text, status=done.status, metrics=done.metrics, error=done.error,
                                  model=job.model, extra=record_of(running.tool_reply) if running.tool_reply else None)
                running.not_saved = unsaved_sentence(opened.not_saved) if opened.not_saved else None
        finally:
            if not opened.closed:  # cancelled while waiting for an engine (the client went away, the server stopped)
                await self._close(opened, reply="", status=MessageStatus.CANCELLED, metrics={},
                                  error="the request ended before an engine was free")
            self._set_live(live_id, None)

    async def embed(self, request: Request, model: InstalledModel, texts: list[str], params: dict[str, Any]) -> Embeddings:
        """Vectors of `texts` from an engine with `model`; recorded like a reply. Raises ApiError."""
        client = request.scope.get("cove.client", CLIENT)
        job = Job(request.url.path, model, [{"role": "input", "content": t} for t in texts], SamplingParams(),
                  record_params=params)
        opened = await self._open(request, job, conversation=False)
        try:
            await self.load_options(model)
            lease = await self.pool.lease(model, client, [])
            try:
                if lease.engine.loaded is not None and not lease.engine.loaded.embeddings:
                    raise ApiError(400, f"{model.name} is not an embedding model (its file declares no pooling type); "
                                        "install one such as an nomic-embed or bge GGUF", param="model",
                                   code="model_not_embedding")
                try:
                    result = await anyio.to_thread.run_sync(lease.client.embed, texts)
                except EngineError as exc:
                    raise ApiError(400, str(exc), param="input") from None
            finally:
                self.pool.release(lease)
        except ApiError as exc:
            await self._close(opened, reply="", status=MessageStatus.ERROR, metrics={}, error=exc.message)
            raise
        except BaseException:  # the client went away, the server stopped
            await self._close(opened, reply="", status=MessageStatus.CANCELLED, metrics={},
                              error="the request ended before its vectors were made")
            raise
        dims = len(result.vectors[0]) if result.vectors else 0
        await self._close(opened, reply=f"{len(result.vectors)} vectors of {dims} numbers", status=MessageStatus.COMPLETE,
                          metrics={"prompt_tokens": result.prompt_tokens})
        return result

    def _start(self, lease: Lease, job: Job, options: LoadOptions) -> tuple[Generation, FileRecheck | None]:
        """Start the reply (on a worker thread); with what a recheck of the model's file found, if
        it changed, for the event loop's thread to store (the library belongs to that thread)."""
        rechecked: list[FileRecheck] = []
        try:
            # An API client sends the conversation it wants answered: nothing is dropped to fit.
            window = lease.engine is self.pool.window_engine
            engine = lease.client if job.tools is None else cast(EngineClient, ToolsEngine(lease.client, job.tools))
            generation = start_generation(
                engine, job.messages, model=job.model, params=job.params, conversation_id=None, stop=job.stop,
                options=options, grammar=job.grammar, keep_all_turns=True, raw_prompt=job.raw_prompt,
                loaded_as_is=window, load=None if window else lambda: self.pool.load(lease.engine),
                on_recheck=rechecked.append)
        except EngineError as exc:
            raise ApiError(500, str(exc), "server_error") from None
        return generation, rechecked[0] if rechecked else None

    async def _close(self, opened: Opened, **end: Any) -> None:
        """Close the request in the record and the history, whatever cancels the caller meanwhile."""
        with anyio.CancelScope(shield=True):
            await self.store.close(opened, **end)

    async def _open(self, request: Request, job: Job, *, conversation: bool) -> Opened:
        """Enter an accepted request in the record and, with `conversation`, the history."""
        params = {"temperature": job.params.temperature, "top_p": job.params.top_p, "max_tokens": job.params.max_tokens,
                  "seed": job.params.seed, "stop": list(job.stop), "stream": job.stream, **job.record_params}
        return await self.store.open(client=request.scope.get("cove.client", CLIENT),
                                     remote=request.client.host if request.client else "", endpoint=job.endpoint,
                                     model=job.model, messages=job.messages, params=params, conversation=conversation)
