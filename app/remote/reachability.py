"""Asking several of the person's servers at once what they serve now (`probe_many`): each on its
own thread with a short connect timeout, so one machine asleep costs the wait for one answer, not
one per machine. Blocking: run it off the window's thread. What each answered is kept by the
caller, on the database's thread (Connections.record_probe)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from app.remote.connections import Connection
from app.remote.errors import RemoteProblem
from app.remote.probe import ServerInfo, probe
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
            return probe(connection, key, gate, connect_timeout_s=connect_timeout_s)
        except RemoteProblem as exc:
            return exc
        except NetworkRefused as exc:
            return RemoteProblem(str(exc), "offline")

    with ThreadPoolExecutor(max_workers=min(8, len(work)), thread_name_prefix="cove-reach") as pool:
        answers = list(pool.map(ask, work))
    return {connection.name: answer for (connection, _), answer in zip(work, answers, strict=True)}
