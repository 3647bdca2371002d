"""Asking several of the person's servers at once what they serve now (`probe_many`): each on its
own thread with a short connect timeout, so one machine asleep costs the wait for one answer, not
one per machine. Blocking: run it off the window's thread. What each answered is kept by the
caller, on the database's thread (Connections.record_probe).

A server last seen as llama-cpp-python's is asked without disturbing a reply it streams
(`_quietly`): that server stops a streaming reply as soon as another request waits for its model
(its `interrupt_requests` setting, on by default), and its GET /v1/models waits for the model.
Its /openapi.json does not, so that is asked there, and the models it listed last are kept: its
models are fixed when it starts. `cove remote models NAME` and Refresh models in the window list them anew."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from app.remote.connections import Connection
from app.remote.errors import RemoteProblem
from app.remote.http_client import RemoteHttp
from app.remote.privacy import is_private_host
from app.remote.probe import PROBE_READ_TIMEOUT_S, ServerInfo, llama_cpp_python_info, probe
from models.network import NetworkGate, NetworkRefused

REACH_TIMEOUT_S = 2.0  # a machine on the person's network answers a connect within it, or is away


def probe_many(
    targets: Iterable[tuple[Connection, str | None]], gate: NetworkGate, *, connect_timeout_s: float = REACH_TIMEOUT_S
) -> dict[str, ServerInfo | RemoteProblem]:
    """{connection name: what it serves now, or the sentence of why it could not be asked}."""
    work = list(targets)
    if not work:
        return {}

    def ask(target: tuple[Connection, str | None]) -> ServerInfo | RemoteProblem:
        connection, key = target
        try:
            if connection.server.get("kind") == "llama-cpp-python":
                return _quietly(connection, key, gate, connect_timeout_s)
            return probe(connection, key, gate, connect_timeout_s=connect_timeout_s)
        except RemoteProblem as exc:
            return exc
        except NetworkRefused as exc:
            return RemoteProblem(str(exc), "offline")

    with ThreadPoolExecutor(max_workers=min(8, len(work)), thread_name_prefix="cove-reach") as pool:
        answers = list(pool.map(ask, work))
    return {connection.name: answer for (connection, _), answer in zip(work, answers, strict=True)}


def _quietly(connection: Connection, key: str | None, gate: NetworkGate, connect_timeout_s: float) -> ServerInfo:
    """llama-cpp-python's server asked where it takes no lock; anything else that answers there
    now is asked in full."""
    http = RemoteHttp(connection, key, gate, connect_timeout_s=connect_timeout_s, read_timeout_s=PROBE_READ_TIMEOUT_S)
    try:
        reply = http.get(http.root_url("/openapi.json"), read_timeout_s=PROBE_READ_TIMEOUT_S, max_bytes=1 << 20)  # raises when away
        info = llama_cpp_python_info(reply.json() if reply.status == 200 else None)
    finally:
        http.close()
    if info is None:
        return probe(connection, key, gate, connect_timeout_s=connect_timeout_s)
    version = info.get("version") if isinstance(info.get("version"), str) else connection.server.get("version")
    models = [dict(m) for m in connection.server.get("models") or [] if isinstance(m, dict)]
    return ServerInfo("llama-cpp-python", version, models, is_private_host(connection.host))
