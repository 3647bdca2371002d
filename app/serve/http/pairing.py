"""`POST /cove/pair`: the other machine redeems a pairing code's secret (`cove remote pair`) for an
API key of its own. Answered only over HTTPS (the client has checked this machine's certificate
against the code before it sends the secret); the secret is checked on the store's thread
(app/serve/http/pairing_codes.py), never on the event loop.

Body: {"secret": the code's 16 secret characters, "name": the client machine's name}. A right
secret of an open code: 200 {"key", "key_name"}, the key shown this once. A wrong one: 401; a code
used already, expired, or spent by wrong tries: 410; more than FAILED_PER_MINUTE failed tries in a
minute on this server: 429 with Retry-After. Every error is a sentence in the API's error shape."""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import sqlite_utils
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.http.errors import ApiError, error_response
from app.serve.http.http import json_body
from app.serve.http.pairing_codes import MAX_FAILURES, PairingCodes, Redeemed

PATH = "/cove/pair"
FAILED_PER_MINUTE = 5
WINDOW_S = 60.0
BODY_BYTES = 4096
MAKE_ANOTHER = "make a new one with `cove serve pair` on this machine"

StoreRun = Callable[..., Awaitable[Any]]  # runs fn(*args) on the store's thread


class FailureLimit:
    """At most `limit` failed tries in any `window_s` seconds. A try takes a place before it is
    checked (so tries sent at once cannot all slip through) and gives it back when it succeeds."""

    def __init__(self, limit: int = FAILED_PER_MINUTE, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._tries: deque[float] = deque()

    def take(self) -> tuple[float | None, float]:
        """(None, the try's place) when a try may go ahead, else (seconds until one may, 0)."""
        now = self.clock()
        while self._tries and now - self._tries[0] >= self.window_s:
            self._tries.popleft()
        if len(self._tries) >= self.limit:
            return self._tries[0] + self.window_s - now, 0.0
        self._tries.append(now)
        return None, now

    def give_back(self, place: float) -> None:
        """The try at `place` succeeded: it does not count."""
        try:
            self._tries.remove(place)
        except ValueError:
            pass


class PairingApi:
    """The route's handler. `run(fn, *args)` runs on the store's thread; `db()` (called there) is
    the history database."""

    def __init__(self, run: StoreRun, db: Callable[[], sqlite_utils.Database], limit: FailureLimit | None = None) -> None:
        self.run, self.db, self.limit = run, db, limit or FailureLimit()

    def _redeem(self, secret: object, name: str) -> Redeemed:
        return PairingCodes(self.db()).redeem(secret, name)

    async def pair(self, request: Request) -> Response:
        if request.url.scheme != "https":
            return error_response(
                403,
                "pairing is answered only over HTTPS, so the other machine can check this one's certificate: "
                "serve with `cove serve --host ADDRESS` (an address other machines reach) and pair with https://",
                "permission_error",
                code="https_only",
            )
        wait, place = self.limit.take()
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            response = error_response(
                429,
                f"too many wrong pairing codes were tried in the last minute; try again in {seconds} s",
                "rate_limit_error",
                code="too_many_tries",
            )
            response.headers["Retry-After"] = str(seconds)
            return response
        try:
            body = await json_body(request, BODY_BYTES)
        except ApiError as exc:
            return exc.response()
        if not isinstance(body, dict):
            return error_response(400, 'the body must be a JSON object: {"secret": ..., "name": ...}')
        name = body.get("name")
        redeemed = await self.run(self._redeem, body.get("secret"), name if isinstance(name, str) else "")
        if redeemed.status == "paired":
            self.limit.give_back(place)
            print(f"cove serve: paired a machine; its key is {redeemed.key_name!r}.", file=sys.stderr, flush=True)
            return JSONResponse({"key": redeemed.key, "key_name": redeemed.key_name}, headers={"Cache-Control": "no-store"})
        return _refusal(redeemed.status)


def _refusal(status: str) -> Response:
    if status == "used":
        return error_response(410, f"this pairing code was used already (a code works once); {MAKE_ANOTHER}", code="code_used")
    if status == "expired":
        return error_response(410, f"this pairing code has expired (a code lasts 10 minutes); {MAKE_ANOTHER}", code="code_expired")
    if status == "spent":
        return error_response(
            410,
            f"this pairing code no longer works: {MAX_FAILURES} wrong codes were tried while it was open; {MAKE_ANOTHER}",
            code="code_spent",
        )
    return error_response(
        401,
        f"the pairing code's secret is not right (it matches no code this machine made); check the code, or {MAKE_ANOTHER}",
        "authentication_error",
        code="wrong_code",
    )
