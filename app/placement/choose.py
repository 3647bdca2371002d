"""Choosing the machine a reply runs on, among the person's servers that hold the same model file
(the same SHA-256, as other Coves say: app/serve/api/model_listing.py).

- A conversation continues where its KV state already is: the machine that wrote its last reply
  with that file keeps the conversation's prefix in its cache, so its prompt is read once there.
  Unless that machine cannot be reached now, or has no slot free.
- Otherwise the one that would answer first: loaded with a slot free, then loaded, then the one
  the person chose.

Pure: the caller gives what each machine said when last asked and which could not be reached,
and keeps the answer's `why` in the reply's figures ("on desk: holds this conversation")."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.remote.remote_model import RemoteModel

HOLDS = "holds this conversation"
LOADED_FREE = "loaded, with a slot free"
LOADED = "loaded"
CHOSEN = "the one you chose"


@dataclass(frozen=True)
class Placement:
    model: RemoteModel  # where the reply runs (its `placement` says why)
    moved_from: str | None = None  # the connection the person chose, when the reply runs elsewhere

    @property
    def why(self) -> str | None:
        return self.model.placement

    def line(self) -> str | None:
        return f"on {self.model.connection}: {self.why}" if self.why else None


def twins(chosen: RemoteModel, models: Iterable[RemoteModel]) -> list[RemoteModel]:
    """The chosen model and every model on another connection with the same file, the chosen first."""
    found = [chosen]
    if not chosen.file_sha256:
        return found
    seen = {chosen.connection}
    for model in models:
        if model.file_sha256 == chosen.file_sha256 and model.connection not in seen:
            seen.add(model.connection)
            found.append(model)
    return found


def holder_of(replies: Iterable[Mapping[str, Any]], sha256: str | None) -> str | None:
    """The connection that wrote the conversation's last reply with this file, from the replies'
    metrics (newest last); None when the last reply ran elsewhere or with another file."""
    last: str | None = None
    for metrics in replies:
        remote = metrics.get("remote") if isinstance(metrics, Mapping) else None
        if not isinstance(remote, dict):
            last = None  # a reply of this machine: no server holds what came after
            continue
        connection = remote.get("connection")
        ok = isinstance(connection, str) and sha256 is not None and remote.get("sha256") == sha256 and remote.get("fault") is None
        last = connection if ok else None
    return last


def place(chosen: RemoteModel, candidates: list[RemoteModel], *, away: Collection[str] = (), holder: str | None = None) -> Placement:
    """Where the reply runs. `candidates`: `twins(chosen, ...)` as last asked; `away`: connections
    that could not be reached just now; `holder`: `holder_of` the conversation."""
    reachable = [m for m in candidates if m.connection not in away]
    if len(candidates) < 2 or not reachable:
        return Placement(chosen)  # nothing to choose: the reply goes where the person chose
    if holder is not None:
        held = next((m for m in reachable if m.connection == holder), None)
        if held is not None and held.free_slots != 0:
            return _at(held, HOLDS, chosen)

    def rank(model: RemoteModel) -> tuple[int, int]:
        free = bool(model.loaded) and (model.free_slots or 0) > 0
        return (0 if free else 1 if model.loaded else 2, 0 if model.connection == chosen.connection else 1)

    best = min(reachable, key=rank)
    why = LOADED_FREE if rank(best)[0] == 0 else LOADED if rank(best)[0] == 1 else CHOSEN
    if why == CHOSEN and best.connection != chosen.connection:
        why = f"{chosen.connection} cannot be reached now"
    return _at(best, why, chosen)


def _at(model: RemoteModel, why: str, chosen: RemoteModel) -> Placement:
    moved = chosen.connection if model.connection != chosen.connection else None
    return Placement(replace(model, placement=why), moved)
