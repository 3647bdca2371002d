"""Which model a `cove chat` names and whether its messages may go there: MODEL_ID@CONNECTION for a
model on one of the person's servers (else an installed model), and the person's agreement, asked
once on a terminal or given with --allow-host, before messages first go to a host outside this
machine and their private network."""

from __future__ import annotations

import sys

from app.core import Core
from app.remote.connections import Connection, ConnectionProblem
from app.remote.privacy import is_private_host, strip_port
from app.remote.remote_model import RemoteModel, remote_models, split_remote_name
from models.library import InstalledModel, ModelNotFound


class NotSent(RuntimeError):
    """The person did not agree (or could not be asked) to send messages to a connection's host."""


def resolve_chat_model(core: Core, name: str | None) -> InstalledModel | RemoteModel:
    """MODEL_ID@CONNECTION when CONNECTION is one of the person's connections; else a local model."""
    split = split_remote_name(name) if name else None
    if split is None:
        return core.resolve_model(name)
    model_id, connection_name = split
    try:
        connection = core.connections.get(connection_name)
    except ConnectionProblem:
        try:
            return core.resolve_model(name)
        except ModelNotFound:
            raise ModelNotFound(
                f"no model named '{name}' here, and no connection named '{connection_name}' (`cove remote list` shows your connections)"
            ) from None
    listed = remote_models(connection)
    for model in listed:
        if model.model_id == model_id:
            return model
    if listed:
        raise ModelNotFound(
            f"{connection.name} ({connection.host}) listed no model '{model_id}' when last asked; "
            f"`cove remote models {connection.name}` asks it again"
        )
    kind = connection.server.get("kind") if connection.server else None  # never reached yet: try it
    return RemoteModel(connection=connection.name, model_id=model_id, host=connection.host, kind=kind if isinstance(kind, str) else None)


def placed(core: Core, model: InstalledModel | RemoteModel, conversation_id: str) -> InstalledModel | RemoteModel:
    """The machine a server's model runs on for this reply: the chosen one, or another of the
    person's machines with the same model file that holds the conversation or would answer first
    (app/placement/); the figures line says which and why."""
    if not isinstance(model, RemoteModel):
        return model
    from app.placement.gather import place_now

    return place_now(core.connections, core.history, core.network, model, conversation_id).model


def agree_to_send(core: Core, connection: Connection, allow_host: str | None) -> None:
    """Refuse offline (the gate's sentence); before messages first go to a host outside this
    machine and the person's network, ask once on a terminal or take `--allow-host HOST`."""
    core.network.check("remote")
    if connection.public_ok or is_private_host(connection.host):
        return
    host = connection.host
    if allow_host is not None:
        if allow_host.strip().lower() not in {host.lower(), strip_port(host).lower()}:
            raise ValueError(f"--allow-host {allow_host} does not name {connection.name}'s server, {host}; nothing was sent")
        core.connections.confirm_public(connection.name)
        return
    if not (isatty(sys.stdin) and isatty(sys.stderr)):
        raise NotSent(
            f"your messages would be sent to {host}, outside this machine and your private network, "
            f"and there is no terminal to ask whether that is all right; nothing was sent. "
            f"Run again with --allow-host {host} to agree once (it is remembered for {connection.name})"
        )
    print(f"Your messages will be sent to {host}. Send them? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer not in {"y", "yes"}:
        raise NotSent(f"nothing was sent to {host}")
    core.connections.confirm_public(connection.name)


def isatty(stream: object) -> bool:
    try:
        return bool(stream is not None and stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False
