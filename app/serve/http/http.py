"""HTTP pieces every endpoint uses: the request body read as JSON within a size limit and a time
limit, one server-sent event, and the Host-header check that keeps web pages out (DNS rebinding)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.serve.http.connections import BODY_TIMEOUT_S
from app.serve.http.errors import ApiError, error_response

MAX_BODY_BYTES = 4 * 1024 * 1024
# The chat endpoints take images inline: one at the 20 MB limit (app/images/checks.py) is 27 MB of
# base64, and this leaves room for the conversation's text beside it.
CHAT_BODY_BYTES = 32 * 1024 * 1024
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class HostCheck:
    """Refuses requests whose Host header is not one of this server's names: a web page the
    person opens could otherwise reach the loopback server through a name it controls."""

    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        self.app, self.names = app, frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
            if name.lower() not in self.names:
                response = error_response(421, f"this server does not answer for the host {host!r}", "invalid_request_error")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def json_body(request: Request, limit: int, timeout_s: float = BODY_TIMEOUT_S) -> object:
    """The request's body as JSON; ApiError (400, 408, 413) with a sentence for a body too large,
    too slow, cut off, not JSON, or nested deeper than the parser goes."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(413, f"the request body is larger than {limit:,} bytes")
    data = bytearray()
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                data += chunk
                if len(data) > limit:
                    raise ApiError(413, f"the request body is larger than {limit:,} bytes")
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s") from None
    except ClientDisconnect:  # no one reads this answer; it ends the request without a traceback
        raise ApiError(400, "the connection closed before the request body ended") from None
    try:
        return json.loads(data)
    except RecursionError:
        raise ApiError(400, "the request body is JSON nested too deeply (arrays and objects inside one another)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None


def sse(event: dict[str, Any], name: str | None = None) -> bytes:
    """One server-sent event holding `event` as JSON (with an `event:` line when named, as the
    Anthropic stream has)."""
    data = b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"
    return b"event: " + name.encode() + b"\n" + data if name else data
