"""What can go wrong talking to the person's own server, as one readable sentence each
(`RemoteProblem`), and the sentence for an HTTP error reply (`problem_from_status`).

Invariant: no sentence ever contains the connection's key; text a server sends back is
trimmed to one line and has the key scrubbed from it (`scrub`) before it is quoted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

# What a RemoteProblem is about.
PROBLEM_KINDS = frozenset({"unreachable", "auth", "not_found", "busy", "server", "context", "protocol", "redirect", "offline", "tls"})

# The most of a server's own error message quoted in a sentence.
SERVER_MESSAGE_CHARS = 200

_BEARER = re.compile(r"(?i)\b(bearer\s+)\S+")


class RemoteProblem(Exception):
    """One readable sentence (str()); `kind` is one of PROBLEM_KINDS; `status` the HTTP status
    when the server answered; `retry_after_s` what a busy server asked us to wait, when it said."""

    def __init__(self, message: str, kind: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        return self.message


def scrub(text: str, key: str | None) -> str:
    """`text` with the key (and anything after "Bearer ") replaced, so it can be quoted."""
    if key:
        text = text.replace(key, "[key]")
    return _BEARER.sub(r"\1[key]", text)


def server_message(body: bytes | str, key: str | None) -> str:
    """The server's own error message from an error reply's body: OpenAI's {"error": {"message"}},
    {"error": "..."}, {"detail": ...} (FastAPI), {"message": ...}, or the text itself; one line,
    trimmed, scrubbed. "" when there is nothing readable."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    message: object = text
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("type") or ""
        elif isinstance(error, str):
            message = error
        elif "detail" in data:
            detail = data["detail"]
            if isinstance(detail, list) and detail and isinstance(detail[0], dict):
                message = detail[0].get("msg") or ""
            else:
                message = detail
        elif "message" in data:
            message = data["message"]
        else:
            message = ""
    line = " ".join(str(message or "").split())
    if "<html" in line.lower() or "<!doctype" in line.lower():
        line = ""  # a proxy's error page says nothing a sentence can use
    line = scrub(line, key)
    if len(line) > SERVER_MESSAGE_CHARS:
        line = line[: SERVER_MESSAGE_CHARS - 1].rstrip() + "…"
    return line


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a Retry-After header given in seconds (an HTTP date is not used), else None."""
    value = (headers.get("retry-after") or "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86400 else None


def problem_from_status(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    host: str,
    key: str | None,
    model_id: str | None = None,
    has_key: bool | None = None,
    paired: str | None = None,
) -> RemoteProblem:
    """The sentence for an HTTP error reply from `host` (status >= 400); `paired`: the connection's
    name when it is one pairing made (its key came from that machine, not from the person)."""
    said = server_message(body, key)
    quoted = f" (it said: {said})" if said else ""
    with_key = key is not None if has_key is None else has_key
    if status in (401, 403):
        if paired is not None:
            text = (
                f"{host} no longer takes the key it gave this machine when you paired as {paired} (HTTP {status}){quoted}; "
                "it may have been unpaired there; pair again to use it."
            )
        elif with_key:
            text = f"{host} refused the key for this connection (HTTP {status}){quoted}; check the key and save it again."
        else:
            text = f"{host} asks for a key (HTTP {status}){quoted}; add the key to this connection."
        return RemoteProblem(text, "auth", status=status)
    if status == 404:
        if model_id:
            text = f"{host} has no model '{model_id}' any more (HTTP 404){quoted}; list the connection's models again and pick one it has."
        else:
            text = f"{host} has nothing at this address (HTTP 404){quoted}; check that the URL ends in the API root, such as /v1."
        return RemoteProblem(text, "not_found", status=status)
    if status == 429:
        wait = retry_after(headers)
        when = f"; it asks to wait {_seconds(wait)} before trying again" if wait is not None else "; try again in a moment"
        return RemoteProblem(f"{host} is busy (HTTP 429){quoted}{when}.", "busy", status=status, retry_after_s=wait)
    if status >= 500:
        wait = retry_after(headers) if status == 503 else None
        when = f"; it asks to wait {_seconds(wait)}" if wait is not None else ""
        return RemoteProblem(
            f"{host} failed to answer (HTTP {status}){quoted or ' without saying why'}{when}.", "server", status=status, retry_after_s=wait
        )
    if status in (400, 413, 422) and _about_context(said):
        return RemoteProblem(
            f"{host} refused the conversation as too long for the model's context (HTTP {status}){quoted}; "
            "start a new conversation or shorten it.",
            "context",
            status=status,
        )
    return RemoteProblem(f"{host} refused the request (HTTP {status}){quoted}.", "server", status=status)


def _about_context(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("context", "too long", "maximum", "exceed", "n_ctx", "tokens"))


def _seconds(value: float) -> str:
    if abs(value - round(value)) >= 0.05:
        return f"{value:.1f} seconds"
    whole = int(round(value))
    return "1 second" if whole == 1 else f"{whole} seconds"
