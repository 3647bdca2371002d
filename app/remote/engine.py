"""Replies from a model on one of the person's servers: POST /v1/chat/completions with
stream=true, read as server-sent events on a daemon thread into a `Generation`, the same
stream of TokenEvents and one FinishedEvent a local reply gives.

`generate()` returns at once (it never waits on the network); `cancel()` ends the reply as
"cancelled" at once with its text, and the stream is closed within one chunk (its socket is
shut down, so even a read waiting on a silent server returns). A fault before any text ends
the reply as "error"; after some text as "interrupted", the text kept; either way
FinishedEvent.error is one sentence.

What the server sends is made storable before anyone sees it: a lone UTF-16 surrogate (a
JSON escape no UTF-8 file or terminal can hold) becomes U+FFFD wherever it is, and a reply
that had any says so once in metrics["text_note"] (the count is remote.replaced_characters).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from app.engine.generation import Failure, Generation
from app.engine.request import ReplyRequest
from app.remote.connections import Connection, pinned_file
from app.remote.errors import RemoteProblem, problem_from_status, scrub, server_message
from app.remote.http_client import RemoteHttp, abort
from app.remote.privacy import ConsentNeeded, is_private_host, private_without_lookup
from app.remote.remote_model import RemoteModel
from app.remote.remote_tools import CALL_FAMILY, ToolCallPieces, served_by
from app.remote.request_body import chat_body
from app.remote.sse import DONE, SseEvent, SseReader, StreamTooLarge, json_payloads, storable, storable_json
from app.statuses import MessageStatus
from models.network import NetworkGate, NetworkRefused

# Unreadable lines or events in a row after which a stream counts as garbage.
MAX_UNREADABLE_IN_A_ROW = 100
ERROR_BODY_BYTES = 64 << 10
WHOLE_REPLY_BYTES = 8 << 20
KEPT = "; the text so far is kept."


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def replaced_sentence(host: str, count: int) -> str:
    """Said once per reply: what became U+FFFD, and why."""
    what = "a character" if count == 1 else f"{count} characters"
    return (
        f"{host} sent {what} that no text file can hold (a lone UTF-16 surrogate); "
        f"{'it is' if count == 1 else 'each is'} kept as U+FFFD (\ufffd)"
    )


def _read_capped(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def _drain(chunks: Iterator[bytes], limit: int = 64 << 10) -> None:
    """Read what follows [DONE] (the body's end, normally nothing), so the connection can be
    used again for the next reply; the reply has already ended, so a slow server costs nothing."""
    read = 0
    try:
        for chunk in chunks:
            read += len(chunk)
            if read > limit:
                return
    except httpx.HTTPError:
        pass


class _Stream:
    """One reply in flight. The stream thread feeds it; `cancel()` may come from any thread."""

    def __init__(self, engine: RemoteEngine, gen: Generation, model: RemoteModel) -> None:
        self.engine = engine
        self.gen = gen
        self.model = model
        self.host = engine.connection.host
        self._lock = threading.Lock()
        self.cancelled = False
        self.response: httpx.Response | None = None
        self.deltas = 0  # pieces of the reply that arrived (tokens, for most servers)
        self.has_text = False
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.unreadable = 0  # events that were not JSON, over the whole stream
        self.in_a_row = 0
        self.thinking = False
        self.replaced = 0  # characters that could not be stored, replaced by U+FFFD
        self.calls = ToolCallPieces()  # the reply's tool calls, as the server streams them
        self.served: dict[str, str] = {}  # which machine and model file served it (another Cove says)

    # ---- from the stream thread ---------------------------------------------------------

    def text(self, piece: str, *, counted: bool = True) -> None:
        """Text of the reply; `counted`: it came as one piece of the stream (a token, for most
        servers; empty when a token completes no character yet)."""
        now = time.perf_counter()
        with self._lock:
            if counted:
                self.deltas += 1
                if self.t_first is None:
                    self.t_first = now
                self.t_last = now
            if piece:
                self.has_text = True
        if piece:
            self.gen.add_token(piece)

    def delta(self, delta: dict[str, Any]) -> None:
        """One chunk's delta. Its reasoning (reasoning_content) is shown as <think>...</think>, as
        a local model that thinks writes it. The first chunk, which only names the role, is not
        a piece of the reply."""
        content, reasoning = delta.get("content"), delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(delta.get("tool_calls"), list):
            self.calls.add(delta["tool_calls"])
        if isinstance(reasoning, str) and reasoning:
            if not self.thinking:
                self.text("<think>\n", counted=False)
                self.thinking = True
            self.text(reasoning)
        if isinstance(content, str) and (content or "role" not in delta):
            if self.thinking and content:
                self.text("\n</think>\n\n", counted=False)
                self.thinking = False
            self.text(content)

    def close_thinking(self) -> None:
        if self.thinking:
            self.thinking = False
            self.text("\n</think>\n\n", counted=False)

    def metrics(self, stop_reason: str, fault: str | None = None) -> dict[str, Any]:
        with self._lock:
            deltas, t_first, t_last = self.deltas, self.t_first, self.t_last
        usage = self.usage or {}
        completion = _int(usage.get("completion_tokens"))
        tokens = completion if completion is not None and self.finish_reason is not None else deltas
        gen_s = (t_last - t_first) if t_first is not None and t_last is not None and deltas > 1 else 0.0
        metrics: dict[str, Any] = {
            "ttft_ms": round(self.gen.ttft_ms, 3) if self.gen.ttft_ms is not None else None,
            "gen_tokens": tokens,
            "gen_ms": round(gen_s * 1000, 3),
            "gen_tps": round((tokens - 1) / gen_s, 2) if gen_s > 0 and tokens > 1 else None,
            "stop_reason": stop_reason,
            "turn_ms": round((time.perf_counter() - self.gen.t_request) * 1000, 1),
        }
        prompt = _int(usage.get("prompt_tokens"))
        if prompt is not None:
            metrics["prompt_tokens"] = prompt
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
        if cached is None and self.timings is not None:
            cached = _int(self.timings.get("cache_n"))
        if cached is not None:
            metrics["cached_tokens"] = cached
        remote: dict[str, Any] = {
            "connection": self.model.connection,
            "host": self.host,
            "kind": self.model.kind,
            "model_id": self.model.model_id,
            "fingerprint": self.model.fingerprint,
            "server_usage": self.usage,
            "server_timings": self.timings,
            **({"sha256": self.model.file_sha256} if self.model.file_sha256 else {}),
            **self.served,
        }
        if self.model.placement:
            remote["placement"] = self.model.placement
        if self.calls:
            metrics["tool_format"] = CALL_FAMILY
        if fault is not None:
            remote["fault"] = fault
        if self.unreadable:
            remote["unreadable_events"] = self.unreadable
        if self.replaced:
            remote["replaced_characters"] = self.replaced
            metrics["text_note"] = replaced_sentence(self.host, self.replaced)
        metrics["remote"] = remote
        return metrics

    def complete(self) -> None:
        self.close_thinking()
        if self.calls:  # written as the family the turn's tool loop reads (and the window hides)
            self.text(self.calls.as_text(), counted=False)
        status = MessageStatus.LENGTH if self.finish_reason == "length" else MessageStatus.COMPLETE
        self.gen.end(None, status, self.metrics("length" if status == MessageStatus.LENGTH else "stop"), None)

    def fault(self, problem: RemoteProblem, fault: str) -> None:
        """End on a fault: "interrupted" (text kept) after some text, else "error"."""
        if self.cancelled:
            return
        message = storable(problem.message)[0]  # the server's own words may be in it
        if self.has_text:
            self.close_thinking()
            sentence = message.rstrip(".") + KEPT
            self.gen.end(None, MessageStatus.INTERRUPTED, self.metrics("interrupted", fault), sentence)
            return
        metrics = self.metrics("error", fault)
        metrics["error_kind"] = f"remote-{problem.kind}"
        if problem.retry_after_s is not None:
            metrics["retry_after_s"] = problem.retry_after_s
        self.gen.end(None, MessageStatus.ERROR, metrics, message, Failure(f"remote-{problem.kind}"))

    # ---- from any thread ----------------------------------------------------------------

    def cancel(self) -> None:
        self.cancelled = True
        self.gen.end(None, MessageStatus.CANCELLED, self.metrics("cancelled"), None)
        response = self.response
        if response is not None:
            abort(response)


class RemoteEngine:
    """Streams replies from one connection's server. Any thread may call `generate()`; each
    reply runs on its own daemon thread. `close()` when done with the connection."""

    def __init__(
        self, connection: Connection, key: str | None, gate: NetworkGate, *, connect_timeout_s: float = 5.0, stall_timeout_s: float = 60.0
    ) -> None:
        self.connection = connection
        self.gate = gate
        self.connect_timeout_s = connect_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self._http = RemoteHttp(connection, key, gate, connect_timeout_s=connect_timeout_s, read_timeout_s=stall_timeout_s)
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<RemoteEngine {self.connection.name} {self.connection.host}>"

    @property
    def http(self) -> RemoteHttp:
        """The connection's requests (its repr never shows the key)."""
        return self._http

    def close(self) -> None:
        self._http.close()

    def check(self) -> None:
        """Raise ConsentNeeded when messages would go to a host outside the private network the
        person has not agreed to, NetworkRefused when Cove is offline. A name is looked up now
        (blocking), not judged by an earlier probe: the network may have changed since; and the
        connection itself goes only to an address judged as it is made (checked_connect.py)."""
        host = self.connection.host
        private = private_without_lookup(host)
        if private is None:
            private = is_private_host(host)
        if not private and not self.connection.public_ok:
            raise ConsentNeeded(host, self.connection.name)
        self.gate.check("remote")

    def generate(self, request: ReplyRequest, *, model: RemoteModel) -> Generation:
        """Start the reply `request` asks for and return at once; iterate the Generation for its
        events. The server is sent the messages, the tools offered, `max_tokens`, `stop` and the
        sampler's settings (app/remote/request_body.py). The tools run here: a call the server
        streams ends the reply, written as CALL_FAMILY's markup for the turn's tool loop
        (app/turn/turn.py), which asks the person and sends the results."""
        self.check()
        body = chat_body(request, model)
        stream: _Stream | None = None

        def on_cancel(_gen: Generation) -> None:
            if stream is not None:
                stream.cancel()

        gen = Generation(f"r{next(self._ids)}", on_cancel)
        stream = _Stream(self, gen, model)
        threading.Thread(target=self._run, args=(stream, body), daemon=True, name=f"cove-remote-{self.connection.name}").start()
        return gen

    # ---- the stream thread --------------------------------------------------------------

    def _run(self, stream: _Stream, body: dict[str, Any]) -> None:
        host = self.connection.host
        try:
            self._stream(stream, body)
        except NetworkRefused as exc:
            stream.fault(RemoteProblem(str(exc), "offline"), "offline")
        except ConsentNeeded as exc:  # the name resolved outside the private network at connect time: nothing sent
            stream.fault(RemoteProblem(str(exc), "unreachable"), "private_network")
        except RemoteProblem as exc:
            stream.fault(exc, exc.kind)
        except httpx.TimeoutException:
            if stream.has_text:
                problem = RemoteProblem(
                    f"{host} stopped sending for {self.stall_timeout_s:g} seconds in the middle of the reply, so Cove stopped waiting",
                    "protocol",
                )
            else:
                problem = RemoteProblem(
                    f"{host} sent nothing for {self.stall_timeout_s:g} seconds after the request, so Cove "
                    "stopped waiting (the server may be overloaded, or still reading a long conversation).",
                    "protocol",
                )
            stream.fault(problem, "stall")
        except httpx.TransportError as exc:
            if stream.finish_reason is not None and stream.has_text:
                stream.complete()  # the reply was whole; only its usage figures were lost
            else:
                stream.fault(self._broken(exc), "cut")
        except StreamTooLarge as exc:
            stream.fault(
                RemoteProblem(
                    f"{host} sent a line of more than {exc.limit >> 20} MiB, which no reply needs, so Cove stopped reading.", "protocol"
                ),
                "too_large",
            )
        except Exception as exc:  # noqa: BLE001 - whatever happens, the reply ends with a sentence
            detail = scrub(str(exc), self._http.key)[:160]
            stream.fault(RemoteProblem(f"Reading the reply from {host} failed ({type(exc).__name__}: {detail}).", "protocol"), "client")
        finally:
            if not stream.gen.done:
                stream.fault(RemoteProblem(f"{host} ended the reply without a result.", "protocol"), "cut")

    def _broken(self, exc: httpx.TransportError) -> RemoteProblem:
        host = self.connection.host
        if isinstance(exc, httpx.RemoteProtocolError):
            detail = scrub(str(exc).splitlines()[0] if str(exc) else "", self._http.key)[:160]
            why = f" ({detail})" if detail else ""
            return RemoteProblem(f"{host} closed the connection before the end of the reply{why}.", "protocol")
        return RemoteProblem(f"The connection to {host} broke in the middle of the reply ({type(exc).__name__}).", "protocol")

    def _stream(self, stream: _Stream, body: dict[str, Any]) -> None:
        url = self._http.api_url("/chat/completions")
        with self._http.stream(url, body, kind="remote", read_timeout_s=self.stall_timeout_s) as response:
            stream.response = response
            if stream.cancelled:
                abort(response)
                return
            stream.served = served_by(response.headers)
            if response.status_code >= 400:
                raw = _read_capped(response, ERROR_BODY_BYTES)
                headers = {k.lower(): v for k, v in response.headers.items()}
                raise problem_from_status(
                    response.status_code,
                    headers,
                    raw,
                    host=self.connection.host,
                    key=self._http.key,
                    model_id=stream.model.model_id,
                    paired=self.connection.name if pinned_file(self.connection.ca_file) else None,
                )
            if response.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json":
                self._whole(stream, _read_capped(response, WHOLE_REPLY_BYTES))
                return
            reader = SseReader()
            chunks = response.iter_bytes()
            for chunk in chunks:
                if stream.cancelled:
                    return
                skipped = reader.skipped
                events = reader.feed(chunk)
                self._count_unreadable(stream, reader.skipped - skipped)
                for event in events:
                    if self._event(stream, event):
                        _drain(chunks)
                        self._done(stream)
                        return
            for event in reader.end():
                if self._event(stream, event):
                    self._done(stream)
                    return
            if stream.cancelled:
                return
            if stream.finish_reason is not None:
                stream.complete()  # a server that ends without [DONE]
                return
            raise RemoteProblem(f"{self.connection.host} ended the stream before the reply finished.", "protocol")

    def _done(self, stream: _Stream) -> None:
        """[DONE] came. Every OpenAI-style server says why a reply ended (finish_reason) before it;
        llama-cpp-python's server sends [DONE] alone when it stops a reply for another request."""
        if stream.finish_reason is None and not stream.cancelled:
            raise RemoteProblem(
                f"{self.connection.host} ended the reply without saying it was finished (a server may stop a reply "
                "when another request reaches it).",
                "protocol",
            )
        stream.complete()

    def _count_unreadable(self, stream: _Stream, count: int) -> None:
        if count <= 0:
            return
        stream.unreadable += count
        stream.in_a_row += count
        if stream.in_a_row >= MAX_UNREADABLE_IN_A_ROW:
            raise RemoteProblem(
                f"{self.connection.host} sent {stream.in_a_row} lines in a row that are not a reply stream, so Cove stopped reading.",
                "protocol",
            )

    def _event(self, stream: _Stream, event: SseEvent) -> bool:
        """Take one event; True when the stream is done ([DONE])."""
        try:
            payloads = list(json_payloads(event))
        except ValueError:
            self._count_unreadable(stream, 1)
            return False
        stream.in_a_row = 0
        for payload in payloads:
            if payload == DONE:
                return True
            assert isinstance(payload, dict)
            payload, replaced = storable_json(payload)
            stream.replaced += replaced
            self._payload(stream, payload)
        return False

    def _payload(self, stream: _Stream, payload: dict[str, Any]) -> None:
        error = payload.get("error")
        if error and not payload.get("choices"):
            said = server_message(json.dumps(payload), self._http.key) or "no reason given"
            raise RemoteProblem(f"{self.connection.host} stopped the reply with an error: {said}.", "server")
        if isinstance(payload.get("usage"), dict):
            stream.usage = payload["usage"]
        if isinstance(payload.get("timings"), dict):
            stream.timings = payload["timings"]
        choices = payload.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta: Any = choice.get("delta")
            if not isinstance(delta, dict):
                delta = choice.get("message")
            if isinstance(delta, dict):
                stream.delta(delta)
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                stream.finish_reason = choice["finish_reason"]

    def _whole(self, stream: _Stream, raw: bytes) -> None:
        """A server that answered the stream request with one whole JSON reply."""
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise RemoteProblem(f"{self.connection.host} answered with something that is not a reply.", "protocol")
        data, replaced = storable_json(data)
        stream.replaced += replaced
        self._payload(stream, data)
        if stream.finish_reason is None:
            stream.finish_reason = "stop"
        stream.complete()
