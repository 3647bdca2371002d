"""What placement needs, gathered: the connections that hold the chosen model's file (read on the
database's thread), what each serves now (asked at once on worker threads, app/remote/reachability.py),
kept as each connection's last probe (the database's thread again), and which of them wrote the
conversation's last reply. `place_now` does it all on one thread, for `cove chat`; the window runs
the asking on a worker between the two database steps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.placement.choose import Placement, holder_of, place, twins
from app.remote.connections import Connection, ConnectionProblem, Connections
from app.remote.errors import RemoteProblem
from app.remote.privacy import private_without_lookup
from app.remote.probe import ServerInfo
from app.remote.reachability import probe_many
from app.remote.remote_model import RemoteModel, remote_models
from models.network import NetworkGate


def sendable(connection: Connection) -> bool:
    """Messages may go there without asking the person: a host on this machine or the private
    network (judged without a lookup), or one they agreed to."""
    return connection.public_ok or bool(private_without_lookup(connection.host))


def twin_targets(connections: Connections, chosen: RemoteModel) -> list[tuple[Connection, str | None]]:
    """(connection, key) of every connection whose last listing had the chosen model's file, the
    chosen one's first; just the chosen one's when no other has it (nothing to ask)."""
    if not chosen.file_sha256:
        return []
    listed = [c for c in connections.list() if c.name == chosen.connection or sendable(c)]
    found = twins(chosen, (m for c in listed for m in remote_models(c)))
    if len(found) < 2:
        return []
    by_name = {c.name: c for c in listed}
    return [(by_name[m.connection], connections.key(m.connection)) for m in found]


def keep_answers(connections: Connections, answers: Mapping[str, ServerInfo | RemoteProblem]) -> set[str]:
    """Keep what each server said as its last probe; the names of those that could not be asked."""
    away: set[str] = set()
    for name, answer in answers.items():
        if isinstance(answer, RemoteProblem):
            away.add(name)
            continue
        try:
            connections.record_probe(name, answer)
        except ConnectionProblem:
            away.add(name)  # removed meanwhile
    return away


def reply_metrics(history: Any, conversation_id: str | None) -> list[dict[str, Any]]:
    """The metrics of the conversation's replies on its current branch, oldest first."""
    if not conversation_id:
        return []
    return [m.metrics or {} for m in history.messages(conversation_id) if m.role == "assistant"]


def decide(connections: Connections, chosen: RemoteModel, away: set[str], replies: list[dict[str, Any]]) -> Placement:
    """Placement among the chosen model's twins as last asked (the database's thread)."""
    listed = [c for c in connections.list() if c.name == chosen.connection or sendable(c)]
    fresh = {m.connection: m for c in listed for m in remote_models(c) if m.file_sha256 == chosen.file_sha256}
    current = fresh.get(chosen.connection, chosen)
    candidates = twins(current, fresh.values())
    return place(current, candidates, away=away, holder=holder_of(replies, chosen.file_sha256))


def place_now(connections: Connections, history: Any, gate: NetworkGate, chosen: RemoteModel, conversation_id: str | None) -> Placement:
    """Where a reply of `chosen` runs, asked now (blocking: up to the reach timeout once)."""
    targets = twin_targets(connections, chosen)
    if not targets:
        return Placement(chosen)
    away = keep_answers(connections, probe_many(targets, gate))
    return decide(connections, chosen, away, reply_metrics(history, conversation_id))
