"""The guard that keeps web pages out of `cove serve`: every request a browser sends on a page's
behalf is refused before it reaches an endpoint, so a page the person opens (on any site, on
another loopback port, or from a file on disk) can neither run a model nor write into the
history or the record.

A page's request shows itself three ways, and each alone refuses it:

- an `Origin` header: browsers add it to every cross-origin request and to every POST; Cove
  serves no pages of its own, so no request it should answer carries one (a `file://` page
  sends `Origin: null`);
- `Sec-Fetch-Site: cross-site` or `same-site` (another port of 127.0.0.1 is the same site);
- a body that is not declared as JSON: the content types a page may send without asking the
  server first (text/plain, form data) are exactly the ones that are not `application/json`, and
  a JSON body makes the browser ask first (a CORS preflight), which Cove never grants.

The Host check (app/serve/http/http.py) is separate: it stops DNS rebinding, whose requests look
same-origin to the browser.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.serve.http.errors import error_response

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})
_PAGE_SITES = frozenset({"cross-site", "same-site"})


def refusal(method: str, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
    """Why a request with `method` and `headers` is refused (status, sentence), or None to answer it."""
    origin = headers.get(b"origin")
    if origin is not None:
        return 403, (
            f"requests from web pages are refused (this one came from {origin.decode('latin-1')!r}): "
            "Cove's API answers programs on this machine, not pages in a browser"
        )
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
    if site in _PAGE_SITES:
        return 403, "requests from web pages are refused: Cove's API answers programs on this machine, not pages in a browser"
    if method.upper() not in _BODYLESS:
        declared = headers.get(b"content-type", b"").decode("latin-1")
        if declared.split(";", 1)[0].strip().lower() != "application/json":
            shown = f"'{declared}'" if declared else "none"
            return 415, (
                f"the request body must be JSON sent with 'Content-Type: application/json' (it was {shown}); "
                "with curl, add -H 'Content-Type: application/json'"
            )
    return None


class BrowserGuard:
    """ASGI middleware: answers a page's request with 403 (or 415 for a body not sent as JSON)
    and passes every other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers: dict[bytes, bytes] = {}
            for name, value in scope.get("headers") or []:
                headers.setdefault(name.lower(), value)
            refused = refusal(scope.get("method", "GET"), headers)
            if refused is not None:
                status, sentence = refused
                kind = "permission_error" if status == 403 else "invalid_request_error"
                await error_response(status, sentence, kind)(scope, receive, send)
                return
        await self.app(scope, receive, send)
