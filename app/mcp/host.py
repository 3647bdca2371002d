"""The MCP client host: the `mcp` SDK on one asyncio thread of its own, with a synchronous
facade (list tools, call a tool, stop all) for the rest of Cove.

Threads: every SDK object lives on the host's loop thread; callers block on a future. The
host never touches SQLite: deciding and recording a call happen on the caller's thread.
One session per server stays open between calls; a server that crashed, hung or sent
garbage is stopped, and the next call starts it again. A stdio server runs on a leash
(app/mcp/launch.py): whatever it started ends with it, and nothing of it outlives Cove.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from app.mcp.approval import ApprovalRequired, Decision, ToolRequest, denial_text
from app.mcp.failures import ToolServerError, describe_failure
from app.mcp.launch import stdio_parameters
from app.mcp.results import ToolLimits, ToolResult, capped, result_text
from app.mcp.servers import ToolServer

T = TypeVar("T")
_STOP_GRACE = 10.0  # seconds the loop thread gets to stop every server (the SDK's own waits are bounded)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]


class _Overdue(Exception):
    """Work on the loop thread outlasted its bound."""


class _Session:
    """One open connection to a server; its requests run one at a time in its own task."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        self.requests: asyncio.Queue[tuple[Callable[[Any], Awaitable[Any]], asyncio.Future[Any]] | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.garbage = False  # the server wrote something that is not MCP
        self.task: asyncio.Task[None] | None = None
        self.running: asyncio.Future[Any] | None = None  # the caller's future of the request in flight


class McpHost:
    """Start with `McpHost(log_file, limits)`; `close()` stops every server and the thread."""

    def __init__(self, log_file: Path, limits: ToolLimits | None = None) -> None:
        self.limits = limits or ToolLimits()
        self.log_file = log_file
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log: TextIO = open(log_file, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()
        self._loop = asyncio.new_event_loop()
        self._sessions: dict[str, _Session] = {}  # loop thread only
        self._stopping: set[asyncio.Task[None]] = set()  # sessions on their way down; loop thread only
        self._closed = False
        self._thread = threading.Thread(target=self._loop.run_forever, name="cove-mcp", daemon=True)
        self._thread.start()

    # -- the synchronous facade (any thread but the loop's) -------------------------------------

    def list_tools(self, server: ToolServer) -> list[ToolInfo]:
        """The tools the server offers now; raises ToolServerError (one sentence)."""

        async def listing(client: Any) -> list[ToolInfo]:
            tools: list[ToolInfo] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools += [ToolInfo(t.name, t.description or "", dict(t.input_schema or {})) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    return tools

        return self._run(server, listing)

    def call_tool(self, request: ToolRequest, decision: Decision | None) -> ToolResult:
        """Run one call if and only if `decision` was made for exactly this request and allows it.
        A denied call never reaches the server. Failures come back as a result with one sentence."""
        if decision is None or not isinstance(decision, Decision) or not decision.covers(request):
            raise ApprovalRequired(
                f"the call of '{request.tool}' on '{request.server.name}' has no decision of the person's: it did not run."
            )
        if not decision.allowed:
            return ToolResult(text=denial_text(request), status="denied")
        cap = self.limits.result_cap_chars

        async def calling(client: Any) -> ToolResult:
            result = await client.call_tool(request.tool, request.arguments, read_timeout_seconds=self.limits.call_timeout_s)
            text = result_text(list(result.content or []), getattr(result, "structured_content", None))
            return capped(text, "tool_error" if result.is_error else "ok", cap)

        try:
            return self._run(request.server, calling, tool=request.tool)
        except ToolServerError as exc:
            return ToolResult(text=str(exc), status="failed")

    def stop(self, name: str) -> None:
        """Stop one server (it starts again on its next use)."""
        if not self._closed:
            try:
                self._submit(self._stop_session(name), 2 * _STOP_GRACE)
            except _Overdue:
                pass

    def stop_all(self) -> None:
        if not self._closed:
            try:
                self._submit(self._stop_all(), 2 * _STOP_GRACE * max(1, len(self._sessions)))
            except _Overdue:
                pass

    def close(self) -> None:
        """Stop every server, then the loop thread. Safe to call twice."""
        if self._closed:
            return
        try:
            self.stop_all()
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_STOP_GRACE)
            if not self._thread.is_alive():
                self._loop.close()
            self._log.close()

    def __enter__(self) -> McpHost:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- on the loop thread --------------------------------------------------------------------

    def _run(self, server: ToolServer, work: Callable[[Any], Awaitable[T]], tool: str | None = None) -> T:
        if self._closed:
            raise ToolServerError(f"the tool server '{server.name}' was not started: Cove is stopping.")
        # The SDK's read timeout ends a call a server does not answer. This bound ends the rest: a
        # start or a call whose transport stays open (an HTTP server that went away mid-call).
        budget = 2 * self.limits.call_timeout_s + _STOP_GRACE
        try:
            result: T = self._submit(self._request(server, work, tool), budget)
        except _Overdue:
            asyncio.run_coroutine_threadsafe(self._stop_session(server.name), self._loop)
            what = f"the call of '{tool}' on the tool server '{server.name}'" if tool else f"the tool server '{server.name}'"
            raise ToolServerError(f"{what} got no answer within {budget:g} seconds; the server was stopped.") from None
        except KeyboardInterrupt:  # Ctrl-C or a signal (Terminated): the call is abandoned, so is the server
            asyncio.run_coroutine_threadsafe(self._stop_session(server.name), self._loop)
            raise
        return result

    def _submit(self, coroutine: Awaitable[T], timeout: float) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise _Overdue from None
        except BaseException:  # a KeyboardInterrupt or a signal's: the caller no longer waits
            future.cancel()
            raise

    async def _request(self, server: ToolServer, work: Callable[[Any], Awaitable[T]], tool: str | None) -> T:
        session = self._sessions.get(server.name)
        if session is not None and session.server != server:  # its definition changed
            await self._stop_session(server.name)
            session = None
        if session is None:
            session = _Session(server)
            self._sessions[server.name] = session
            session.task = asyncio.create_task(self._serve(session))
        try:
            await session.ready
        except BaseException as exc:
            raise describe_failure(server, exc, starting=True, garbage=session.garbage, timeout_s=self.limits.call_timeout_s) from None
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await session.requests.put((work, done))
        try:
            return await done
        except (ToolServerError, asyncio.CancelledError):  # cancelled: the caller went away; close() stops the server
            raise
        except BaseException as exc:
            failure = describe_failure(
                server, exc, starting=False, garbage=session.garbage, tool=tool, timeout_s=self.limits.call_timeout_s
            )
            if failure.ends_session:
                await self._stop_session(server.name)
            raise failure from None

    async def _serve(self, session: _Session) -> None:
        from mcp import Client

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):
                session.garbage = True
                self._note(session.server, f"output that is not MCP: {message}")

        server = session.server
        self._note(server, f"starting: {server.identity}")
        try:
            client = Client(
                self._transport(server), read_timeout_seconds=self.limits.call_timeout_s, message_handler=on_message, cache=None
            )
            async with client:
                session.ready.set_result(None)
                while (item := await session.requests.get()) is not None:
                    work, done = item
                    session.running = done
                    try:
                        outcome = await work(client)
                    except Exception as exc:  # noqa: BLE001 - handed to the caller as one sentence
                        if not done.done():
                            done.set_exception(exc)
                    else:
                        if not done.done():
                            done.set_result(outcome)
                    session.running = None
        except BaseException as exc:
            if not session.ready.done():
                session.ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
            self._note(server, f"stopped: {type(exc).__name__}: {exc}")
        finally:
            self._fail_waiting(session)
            self._note(server, "stopped")

    def _transport(self, server: ToolServer) -> Any:
        from mcp.client.stdio import stdio_client

        if server.url:
            return server.url  # the SDK's Streamable HTTP client (httpx2); no proxy from the environment
        return stdio_client(stdio_parameters(server), errlog=self._log)

    def _fail_waiting(self, session: _Session) -> None:
        running, session.running = session.running, None
        if running is not None and not running.done():
            running.set_exception(ConnectionError("the server stopped"))
        while not session.requests.empty():
            item = session.requests.get_nowait()
            if item is not None and not item[1].done():
                item[1].set_exception(ConnectionError("the server stopped"))
        if self._sessions.get(session.server.name) is session:
            del self._sessions[session.server.name]

    async def _stop_session(self, name: str) -> None:
        """Stop a server: at once when a call is in flight (its caller is told the server stopped),
        else once its session has wound down (bounded)."""
        session = self._sessions.pop(name, None)
        if session is None or session.task is None:
            return
        self._stopping.add(session.task)
        session.task.add_done_callback(self._stopping.discard)
        await session.requests.put(None)
        if session.running is not None:
            session.task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(session.task), _STOP_GRACE)
        except (TimeoutError, asyncio.CancelledError):
            session.task.cancel()
        except Exception:  # noqa: BLE001 - the session already logged why it ended
            pass

    async def _stop_all(self) -> None:
        """Every server stopped, those another stop began included (bounded)."""
        for name in list(self._sessions):
            await self._stop_session(name)
        if self._stopping:
            await asyncio.wait(list(self._stopping), timeout=_STOP_GRACE)

    def _note(self, server: ToolServer, line: str) -> None:
        try:
            self._log.write(f"[cove: tool server {server.name}] {line}\n")
            self._log.flush()
        except (OSError, ValueError):
            pass
