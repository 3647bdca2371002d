"""The second half of `cove models list`: the models of the person's servers and paired machines,
under each connection's name, with whether it answers now. Every connection is asked at once
(app/remote/reachability.py, a short connect timeout), and what it said is kept as its last probe;
one that does not answer shows what it listed when last asked. `--here` leaves them out (nothing
goes to the network); so does offline mode, which says so."""

from __future__ import annotations

import sys
from typing import Any

from app.cli.terminal_text import say
from app.core import Core
from app.remote.errors import RemoteProblem
from app.remote.reachability import probe_many
from app.remote.remote_model import RemoteModel, remote_models
from models.network import NetworkRefused


def server_models(core: Core) -> list[dict[str, Any]]:
    """One entry per connection: {"connection", "host", "paired", "reachable", "problem", "models"}."""
    connections = core.connections.list()
    if not connections:
        return []
    try:
        core.network.check("remote-models")
        answers = probe_many([(c, core.connections.key(c.name)) for c in connections], core.network)
    except NetworkRefused as exc:
        answers = {c.name: RemoteProblem(str(exc), "offline") for c in connections}
    found = []
    for connection in connections:
        answer = answers.get(connection.name)
        problem = str(answer) if isinstance(answer, RemoteProblem) else None
        if answer is not None and problem is None:
            connection = core.connections.record_probe(connection.name, answer)  # type: ignore[arg-type]
        found.append(
            {
                "connection": connection.name,
                "host": connection.host,
                "paired": core.connections.is_pinned(connection),
                "reachable": problem is None,
                "problem": problem,
                "models": [_model_json(m) for m in remote_models(connection)],
            }
        )
    return found


def _model_json(model: RemoteModel) -> dict[str, Any]:
    return {
        "name": model.name,
        "model_id": model.model_id,
        "kind": model.kind,
        "sha256": model.file_sha256,
        "context_length": model.context_length,
        "loaded": model.loaded,
        "free_slots": model.free_slots,
    }


def server_entries(servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`--json`'s entries after this machine's models: one per server model, with where it is."""
    where = ("connection", "host", "paired", "reachable", "problem")
    return [{**model, **{key: s[key] for key in where}} for s in servers for model in s["models"]]


def print_server_models(entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        paired = ", paired" if entry["paired"] else ""
        state = "answers now" if entry["reachable"] else f"not reachable now: {entry['problem']}"
        say(f"\nOn {entry['connection']} ({entry['host']}{paired}), {state}", sys.stdout)
        if not entry["models"]:
            say("  (no models listed)", sys.stdout)
            continue
        width = max(len(m["name"]) for m in entry["models"])
        for model in entry["models"]:
            say(f"  {model['name']:<{width}}  {_state(model, entry['reachable'])}", sys.stdout)


def _state(model: dict[str, Any], reachable: bool) -> str:
    parts = [f"ctx {model['context_length']}" if model["context_length"] else "ctx ?"]
    if not reachable:
        parts.append("as listed when last asked")
    elif model["loaded"] is True:
        free = model["free_slots"]
        parts.append("loaded" + (f", {free} slot{'s' if free != 1 else ''} free" if isinstance(free, int) else ""))
    elif model["loaded"] is False:
        parts.append("not loaded")
    if model["sha256"]:
        parts.append(f"sha256 {model['sha256'][:12]}")
    return " · ".join(parts)
