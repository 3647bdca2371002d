"""One sentence for each way a tool server can fail: it does not start, it crashes, it hangs
past the timeout, or it answers with something that is not MCP; and the result of a call Cove
sent whose answer it stopped waiting for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.mcp.results import ToolResult

if TYPE_CHECKING:
    from app.mcp.approval import ToolRequest
    from app.mcp.servers import ToolServer

# JSON-RPC codes the SDK uses for its own conditions (mcp_types).
_REQUEST_TIMEOUT = -32001
_CONNECTION_CLOSED = -32000


class ToolServerError(Exception):
    """A failure of a tool server, as one sentence. `ends_session`: the server is stopped."""

    def __init__(self, sentence: str, ends_session: bool = True) -> None:
        super().__init__(sentence)
        self.ends_session = ends_session


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_failure(
    server: ToolServer, exc: BaseException, *, starting: bool, garbage: bool, tool: str | None = None, timeout_s: float | None = None
) -> ToolServerError:
    from mcp import MCPError
    from pydantic import ValidationError

    exc = _leaf(exc)
    name = f"the tool server '{server.name}'"
    what = f"the call of '{tool}' on {name}" if tool else name
    code = exc.code if isinstance(exc, MCPError) else None
    within = f" within {timeout_s:g} seconds (the timeout setting)" if timeout_s else " in time"
    if garbage and (code in (_REQUEST_TIMEOUT, _CONNECTION_CLOSED) or isinstance(exc, (ValidationError, ValueError))):
        return ToolServerError(f"{name} wrote output that is not MCP and gave no answer; it was stopped.")
    if isinstance(exc, ValidationError):
        return ToolServerError(f"{name} answered with something that is not a valid MCP result; it was stopped.")
    if code == _REQUEST_TIMEOUT or isinstance(exc, TimeoutError):
        if starting:
            return ToolServerError(f"{name} started but did not answer{within}; it was stopped.")
        return ToolServerError(f"{what} got no answer{within}; the server was stopped.")
    program = server.command[0] if server.command else server.url
    if isinstance(exc, FileNotFoundError) and starting:
        return ToolServerError(f"{name} could not start: '{program}' was not found.")
    if isinstance(exc, PermissionError) and starting:
        return ToolServerError(f"{name} could not start: '{program}' cannot be run (permission denied).")
    if (
        code == _CONNECTION_CLOSED
        or isinstance(exc, (ConnectionError, EOFError))
        or type(exc).__name__ in ("EndOfStream", "BrokenResourceError", "ClosedResourceError")
    ):
        if starting:
            return ToolServerError(f"{name} stopped while it was starting (its messages are in Cove's tool log).")
        during = f" during the call of '{tool}'" if tool else ""
        return ToolServerError(f"{name} stopped{during}; it will be started again for the next call.")
    if isinstance(exc, MCPError):
        return ToolServerError(f"{name} refused {what}: {exc}.", ends_session=False)
    if type(exc).__module__.startswith(("httpx", "httpcore")):
        return ToolServerError(f"{name} at {server.url} could not be reached ({type(exc).__name__}: {exc}).")
    if isinstance(exc, OSError):
        return ToolServerError(f"{name} could not start: {exc.strerror or exc}.")
    return ToolServerError(f"{name} failed: {type(exc).__name__}: {exc}.")


def interrupted(request: ToolRequest, why: str) -> ToolResult:
    """A call that was sent and whose answer Cove stopped waiting for (`why`: "Cove quit", "Cove was
    stopped (SIGTERM)"): status 'interrupted'; the server may have done it."""
    return ToolResult(
        f"{why} while the call of '{request.tool}' on '{request.server.name}' ran; its result is unknown (the server may have done it).",
        "interrupted",
    )
