"""What every endpoint shares: who is asking (the key's name), which installed model a name means,
running one reply as app/turn's Turn on an engine lent by the pool, and entering each request in
the written record and the history from its acceptance to its end (app/serve/api/request_store.py,
through the turn's writer, app/serve/api/request_turn.py). Runs on the server's event loop thread;
every SQLite read and write runs on the store's own thread."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import anyio
from starlette.requests import Request

from app.core import Core
from app.engine.client import EngineError
from app.engine.generation import FinishedEvent
from app.engine.loaded import Embeddings
from app.engine.request import ReplyRequest, cannot_see_images, sees_images
from app.images.store import passing_images
from app.load_options import LoadOptions, load_options
from app.routing.auto import AutoChoice, is_auto
from app.serve.api.auto_model import auto_choice
from app.serve.api.image_parts import with_image_budget
from app.serve.api.job import ChatRead, Job
from app.serve.api.request_store import Opened, RequestStore, StoreThread
from app.serve.api.request_turn import RequestBackend, RequestWriter
from app.serve.api.running import ReplyEvent, Running
from app.serve.http.errors import ApiError
from app.serve.http.peer_owner import without_keys
from app.serve.pool.engines import Lease
from app.serve.pool.live_request import LiveRequest
from app.serve.pool.pool import ModelPool
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.turn.backend import backend_for
from app.turn.events import EndEvent, RecheckedEvent
from app.turn.status import StopCause
from app.turn.turn import Turn
from models.library import InstalledModel, ModelNotFound

T = TypeVar("T")
READERS = 4  # request bodies read (their images decoded) at once, in threads of their own
CLIENT = "local API"  # the record's client for a loopback request while no key is made


def failure_error(end: EndEvent | FinishedEvent, reasoning_param: str = "reasoning_effort") -> ApiError:
    """The error a reply that ended as an error is answered with: a prompt larger than the
    context, or a reasoning switch the model's template cannot honour (named by `reasoning_param`),
    is the client's (400, with the numbers or the sentence), anything else the server's. `end`:
    the Turn's end, or the engine's own where a request waits on the engine directly
    (count_tokens.py)."""
    failure, error = end.failure, (end.message.error if isinstance(end, EndEvent) else end.error)
    if failure is not None and failure.kind == "context" and failure.n_ctx:
        size = f"at least {failure.prompt_tokens:,}" if failure.at_least else f"{failure.prompt_tokens:,}"
        return ApiError(
            400,
            f"This model's maximum context length is {failure.n_ctx:,} tokens; your messages are {size} "
            f"tokens, and {failure.reserve or 0:,} are kept for the reply. Shorten the messages or "
            "lower max_tokens.",
            param="messages",
            code="context_length_exceeded",
        )
    if failure is not None and failure.kind == "grammar":
        param = "tools" if (error or "").startswith("the tools") else "response_format"
        return ApiError(400, error or "the response_format cannot be enforced", param=param)
    if failure is not None and failure.kind == "reasoning":
        return ApiError(400, f"'{reasoning_param}': {error or 'the model cannot reason as asked'}", param=reasoning_param)
    return ApiError(500, error or "the engine stopped without a reply", "server_error")


# A token of any vocabulary spans at most this many characters (the longest are runs of spaces or
# punctuation, well under 100): a prompt longer than the context times this cannot fit.
MAX_CHARS_PER_TOKEN = 256
UNKNOWN_CONTEXT = 131_072  # the context bound for a model whose file does not say its own


def refuse_what_cannot_fit(job: Job, n_ctx: int | None) -> None:
    """Refuse, before anything is written or an engine waited for, a request that surely cannot
    fit the model's context: more messages than the context has tokens (each takes one at least),
    or more characters than its tokens could span. What may fit is measured by the engine."""
    context = max(n_ctx or 0, job.model.context_length or 0) or UNKNOWN_CONTEXT
    raw = job.request.raw_prompt
    texts = [raw] if raw is not None else [m.text for m in job.request.messages]
    if len(texts) > context:
        raise ApiError(
            400,
            f"This model's maximum context length is {context:,} tokens, and your request has "
            f"{len(texts):,} messages, each at least one token. Send fewer messages.",
            param="messages",
            code="context_length_exceeded",
        )
    chars = sum(len(t) for t in texts)
    if chars > context * MAX_CHARS_PER_TOKEN:
        raise ApiError(
            400,
            f"This model's maximum context length is {context:,} tokens, and your request has "
            f"{chars:,} characters, more than that many tokens can hold. Shorten the messages.",
            param="messages",
            code="context_length_exceeded",
        )


@asynccontextmanager
async def held_images(request: ReplyRequest) -> AsyncIterator[None]:
    """The request's images kept in the passing folder while its reply runs (app/images/store.py)."""
    shas = [sha for sha, _ in request.image_files]
    if not shas:
        yield
        return
    passing = passing_images()
    passing.hold(shas)
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(passing.release, shas)  # (it deletes old files)


def refuse_what_it_cannot_see(model: InstalledModel, request: ReplyRequest, param: str = "messages") -> None:
    """Refuse, before anything is written or an engine waited for, a request with images for a
    model that cannot see them (sees_images); `param`: the field that holds the messages."""
    if request.images() and not sees_images(model):
        raise ApiError(400, cannot_see_images(model.name), param=param, code="model_not_vision")


class Service:
    def __init__(self, core: Core, pool: ModelPool) -> None:
        self.core, self.pool = core, pool
        passing_images(core.paths.passing_images_dir)  # the API's images go under Cove's own cache folder
        # Every write about a request runs on the store's own thread and connection, off the event loop.
        paths = core.paths
        self.store = RequestStore(StoreThread(paths.database, paths.models_dir, paths.kv_states_dir, paths.settings_file))
        self._options: dict[str, LoadOptions] = {}  # model path -> its load settings, read on the store's thread
        pool.read_options_with(self.options_of)
        self._ids = itertools.count(1)
        self._readers: anyio.CapacityLimiter | None = None  # made on the event loop, at the first request
        self._live: dict[int, tuple[LiveRequest, Turn | None, Running | None]] = {}
        self._live_lock = threading.Lock()  # the window reads the list from its own thread
        self.stopping = False

    def stop_all(self) -> None:
        """The server is stopping (any thread): replies in progress end as cancelled within a
        token (StopCause.SERVER), so they are recorded and their clients told; one still starting
        ends so as soon as it starts; requests still waiting are refused."""
        self.stopping = True
        with self._live_lock:
            turns = [turn for _row, turn, _running in self._live.values() if turn is not None]
        for turn in turns:
            turn.cancel(StopCause.SERVER)

    def close(self) -> None:
        """The server has stopped (not on the event loop): the store's last writes, then its thread."""
        self.store.stop()
        self.store.thread.close()

    def live(self) -> list[LiveRequest]:
        """The requests being answered now, oldest first (any thread)."""
        with self._live_lock:
            rows = list(self._live.values())
        return [replace(row, tokens=running.tokens) if running else row for row, _turn, running in rows]

    def _set_live(self, live_id: int, row: LiveRequest | None, turn: Turn | None = None, running: Running | None = None) -> None:
        with self._live_lock:
            if row is None:
                self._live.pop(live_id, None)
            else:
                self._live[live_id] = (row, turn, running)

    async def client(self, request: Request) -> str:
        """Who is asking: the name of the key the request carries (Authorization: Bearer, or
        x-api-key). Without any key made, a request from a program of the person's own account
        is the "local API"; one from another account on this computer, or from another machine
        (which can only pair then), is refused."""
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "").strip()
        keys = self.store.thread.keys
        any_key, name = await self.store.thread.run(lambda: (bool(keys.names()), keys.name_of(key) if key else None))
        if not any_key:
            refused = without_keys(request.scope.get("client"), request.scope.get("server"))
            if refused is not None:
                raise refused
            return CLIENT
        if name is None:
            raise ApiError(
                401, "a valid API key is needed (cove serve keys add NAME makes one)", "authentication_error", code="invalid_api_key"
            )
        return name

    async def read(self, reader: Callable[[Any], T], body: Any) -> T:
        """`reader(body)` in a worker thread, READERS at a time: an image is decoded there, never on
        the event loop, and the threads a waiting reply holds (anyio's default pool) never keep
        another request from being read."""
        if self._readers is None:
            self._readers = anyio.CapacityLimiter(READERS)
        return await anyio.to_thread.run_sync(with_image_budget, reader, body, limiter=self._readers)

    async def models(self) -> list[InstalledModel]:
        """The installed models (read on the store's thread)."""
        return await self.store.thread.run(self.store.thread.library.list)

    async def model(self, name: str) -> InstalledModel:
        """The installed model `name` means: its name, or its file's name without .gguf, or its
        Hugging Face repo when one model came from it; letter case aside."""
        found = await self.store.thread.run(self._model_now, name)
        if found is None:
            raise ApiError(
                404, f"the model '{name}' is not installed here (GET /v1/models lists them)", code="model_not_found", param="model"
            )
        return found

    async def model_for(self, name: str, read: ChatRead) -> tuple[InstalledModel, AutoChoice | None]:
        """The model a chat request names, or the one Auto chooses for it when it names "auto"
        (app/serve/api/auto_model.py), with that choice."""
        if not is_auto(name):
            return await self.model(name), None
        loaded = {engine.model.path for engine in self.pool.loaded()}
        return await self.store.thread.run(auto_choice, self.store.thread, read, loaded)

    def _model_now(self, name: str) -> InstalledModel | None:
        library = self.store.thread.library
        try:
            return library.get(name)
        except ModelNotFound:
            pass
        wanted = name.strip().lower().removesuffix(".gguf")
        models = library.list()
        for alias in (lambda m: m.name, lambda m: (m.file or m.path).rsplit("/", 1)[-1].removesuffix(".gguf"), lambda m: m.repo or ""):
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
        return self._options.get(model.path) or LoadOptions(self.core.settings.placement_for(model.name), mmproj_path=model.mmproj_path)

    async def open_reply(self, request: Request, job: Job) -> tuple[Running, Callable[[], Awaitable[None]]]:
        """`reply` entered by hand, for a response that outlives the endpoint's call (a stream):
        call the returned close once, however the response ends. Raises ApiError."""
        stack = AsyncExitStack()
        running = await stack.enter_async_context(self.reply(request, job))
        running.close_early = stack.aclose
        return running, stack.aclose

    async def open_stream(self, request: Request, job: Job) -> tuple[Running, Callable[[], Awaitable[None]], ReplyEvent | None]:
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
        if isinstance(first, EndEvent) and first.status == MessageStatus.ERROR and not running.text:
            await close()
            raise failure_error(first, job.reasoning_param)
        return running, close, first

    @asynccontextmanager
    async def reply(self, request: Request, job: Job) -> AsyncIterator[Running]:
        """Enter the request (the record, the history) as it is accepted, lend an engine with the
        job's model, and run the reply as a Turn (app/turn/turn.py) behind the engine's Backend,
        giving its events, its text checkpointed as it streams. However it ends (finished, failed,
        the client gone), the engine is given back and the request is closed in the record and
        the history once, with the status the Turn wrote. Raises ApiError before the reply starts
        (entered as an error); a request refused by what the model cannot see or fit is refused
        before it is entered, and reaches no engine."""
        refuse_what_it_cannot_see(job.model, job.request, job.messages_param)
        refuse_what_cannot_fit(job, self.pool.n_ctx)
        async with held_images(job.request), self._reply(request, job) as running:
            yield running

    @asynccontextmanager
    async def _reply(self, request: Request, job: Job) -> AsyncIterator[Running]:
        client = request.scope.get("cove.client", CLIENT)
        live_id = next(self._ids)
        waiting = LiveRequest(live_id, client, job.model.name, job.endpoint, "waiting", 0, time.time())
        self._set_live(live_id, waiting)
        # The request is entered in the record and the history (a commit that waits for the disk)
        # while the engine is lent and reads the prompt; the reply's first event is taken only
        # once it is entered, so every text checkpoint has its row.
        opening = asyncio.ensure_future(self._open(request, job, conversation=True))
        writer = RequestWriter(self.store, None, tools=job.tools, call_id_prefix=job.call_id_prefix, reply_format=job.reply_format)
        turn = Turn(writer, job.request)
        self._set_live(live_id, waiting, turn)
        lease: Lease | None = None
        backend: RequestBackend | None = None
        running: Running | None = None
        try:
            try:
                options = await self.load_options(job.model)  # read before the pool may spawn an engine with them
                lease = await self.pool.lease(job.model, client)
                if self.stopping:
                    raise ApiError(503, "the server is stopping", "server_error")
                backend = self._backend(lease, job, options)
                await anyio.to_thread.run_sync(turn.start, backend)  # loads the model if need be
                await _entered(writer, opening)
                first = turn.poll()
                for event in first:
                    if isinstance(event, RecheckedEvent):  # the file changed under the server: the record names the one that runs
                        library = self.store.thread.library
                        writer.model = await self.store.thread.run(library.record_recheck, job.model.name, event.recheck)
                failed = next((e for e in first if isinstance(e, EndEvent) and e.before_reply), None)
                if failed is not None:  # the engine could not start the reply
                    raise ApiError(500, failed.message.error or "the engine stopped without a reply", "server_error")
            except ApiError as exc:
                await _entered(writer, opening)
                if turn.ended is None:
                    turn.fail(exc.message)
                raise
            assert backend.generation is not None
            running = Running(turn, backend.generation, first)
            self._set_live(live_id, replace(waiting, status="running"), turn, running)
            yield running
        finally:
            generation = backend.generation if backend is not None else None
            try:
                await _entered(writer, opening)
            except BaseException:  # the request could not be entered: the engine stops and goes back
                if generation is not None:
                    generation.cancel()
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(generation.wait)
                if lease is not None:
                    self.pool.release(lease)
                self._set_live(live_id, None)
                raise
            if turn.ended is None and generation is not None:
                # The client went away mid-reply: stop the engine, let it finish first.
                turn.cancel(StopCause.PERSON)
                with anyio.CancelScope(shield=True):
                    end = await anyio.to_thread.run_sync(generation.wait)
                turn.end_reply(FinishedEvent(end.text, MessageStatus.CANCELLED, end.metrics))
            elif turn.ended is None:  # cancelled while waiting for an engine (the client went away, the server stopped)
                turn.end_reply(FinishedEvent("", MessageStatus.CANCELLED, {}, "the request ended before an engine was free"))
            if lease is not None:
                self.pool.release(lease)
            if running is not None:
                running.tool_reply = writer.tool_reply
            await writer.close()
            if running is not None:
                running.not_saved = writer.not_saved
            self._set_live(live_id, None)

    async def embed(self, request: Request, model: InstalledModel, texts: list[str], params: dict[str, Any]) -> Embeddings:
        """Vectors of `texts` from an engine with `model`; recorded like a reply. Raises ApiError."""
        client = request.scope.get("cove.client", CLIENT)
        inputs = [{"role": "input", "content": t} for t in texts]  # the record's view of the texts
        job = Job(request.url.path, model, ReplyRequest.chat(inputs), inputs, SamplingParams(), record_params=params)
        opened = await self._open(request, job, conversation=False)
        try:
            await self.load_options(model)
            lease = await self.pool.lease(model, client, exclusive=True)  # the engine embeds with no reply in flight
            try:
                if lease.engine.loaded is not None and not lease.engine.loaded.embeddings:
                    raise ApiError(
                        400,
                        f"{model.name} is not an embedding model (its file declares no pooling type); "
                        "install one such as an nomic-embed or bge GGUF",
                        param="model",
                        code="model_not_embedding",
                    )
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
            await self._close(
                opened, reply="", status=MessageStatus.CANCELLED, metrics={}, error="the request ended before its vectors were made"
            )
            raise
        dims = len(result.vectors[0]) if result.vectors else 0
        await self._close(
            opened,
            reply=f"{len(result.vectors)} vectors of {dims} numbers",
            status=MessageStatus.COMPLETE,
            metrics={"prompt_tokens": result.prompt_tokens},
        )
        return result

    def _backend(self, lease: Lease, job: Job, options: LoadOptions) -> RequestBackend:
        """The reply's Backend: the model on the lent engine (the window's own as it has it
        loaded; another with the pool's settings)."""
        window = lease.engine is self.pool.window_engine
        backend = backend_for(
            job.model,
            engine=lease.client,
            options=options,
            loaded_as_is=window,
            load=None if window else lambda: self.pool.load(lease.engine),
            n_ctx=job.params.n_ctx,
        )
        return RequestBackend(backend)

    async def _close(self, opened: Opened, **end: Any) -> None:
        """Close the request in the record and the history, whatever cancels the caller meanwhile."""
        with anyio.CancelScope(shield=True):
            await self.store.close(opened, **end)

    async def _open(self, request: Request, job: Job, *, conversation: bool) -> Opened:
        """Enter an accepted request in the record and, with `conversation`, the history."""
        params = {
            "temperature": job.params.temperature,
            "top_p": job.params.top_p,
            "max_tokens": job.params.max_tokens,
            "seed": job.params.seed,
            "stop": list(job.stop),
            "stream": job.stream,
            **job.record_params,
        }
        return await self.store.open(
            client=request.scope.get("cove.client", CLIENT),
            remote=request.client.host if request.client else "",
            endpoint=job.endpoint,
            model=job.model,
            messages=job.messages,
            params=params,
            conversation=conversation,
        )


async def _entered(writer: RequestWriter, opening: asyncio.Future[Opened]) -> None:
    """Wait (whatever cancels the caller) until the store has entered the request, and give the
    writer its entry and row; raises what the store raised."""
    if not writer.entered:
        with anyio.CancelScope(shield=True):
            writer.opened_as(await opening)
