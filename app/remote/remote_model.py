"""A model on one of the person's servers, named `MODEL_ID@CONNECTION` everywhere (the picker,
a reply row's model_name, `cove chat --model`)."""

from __future__ import annotations

from dataclasses import dataclass

from app.remote.connections import CONNECTION_NAME, Connection


@dataclass(frozen=True)
class RemoteModel:
    connection: str
    model_id: str
    host: str  # host[:port] of the connection's URL, as shown to the person
    kind: str | None  # the server's kind at the last probe (see app/remote/probe.py)
    fingerprint: str | None = None  # what the server offers to identify the weights (Ollama's digest)
    context_length: int | None = None  # the model's context, when the server says
    # Another Cove says more (app/serve/api/model_listing.py): the model file's SHA-256 (the same
    # file on two machines is the same model) and, when it was asked, whether it was loaded and
    # how many of its slots were free.
    file_sha256: str | None = None
    loaded: bool | None = None
    free_slots: int | None = None
    # Why a reply runs on this connection when the same file is on several (app/placement/choose.py).
    placement: str | None = None

    # Like an InstalledModel, for code that writes a reply row: no local file, no quant.
    sha256 = None
    quant = None

    @property
    def name(self) -> str:
        return f"{self.model_id}@{self.connection}"


def split_remote_name(name: str) -> tuple[str, str] | None:
    """("MODEL_ID", "CONNECTION") of a remote model's name, split on the last "@"; None when the
    name cannot be one (no "@", nothing before it, or no valid connection name after it)."""
    model_id, at, connection = name.rpartition("@")
    if not at or not model_id or not CONNECTION_NAME.fullmatch(connection):
        return None
    return model_id, connection


def remote_models(connection: Connection) -> list[RemoteModel]:
    """The models the connection's last probe found, in the order the server listed them."""
    kind = connection.server.get("kind") if connection.server else None
    found: list[RemoteModel] = []
    for entry in (connection.server or {}).get("models") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            continue
        context = entry.get("context_length")
        fingerprint = entry.get("fingerprint")
        sha, loaded, free = entry.get("sha256"), entry.get("loaded"), entry.get("free_slots")
        found.append(
            RemoteModel(
                connection=connection.name,
                model_id=entry["id"],
                host=connection.host,
                kind=kind if isinstance(kind, str) else None,
                fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
                context_length=context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None,
                file_sha256=sha if isinstance(sha, str) and len(sha) == 64 else None,
                loaded=loaded if isinstance(loaded, bool) else None,
                free_slots=free if isinstance(free, int) and not isinstance(free, bool) and free >= 0 else None,
            )
        )
    return found
