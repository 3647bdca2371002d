"""What GET /v1/models says of each model: the OpenAI entry, and Cove's own `cove` object beside
it, which another of the person's Coves reads (app/remote/probe.py) to show the model and to
choose where a conversation runs (app/placement/): the model file's SHA-256 (the same file on two
machines is the same model), its context, whether it reads images, and, from the engine pool at
the moment of asking, whether it is loaded and how many of its slots are free. The listing itself
carries the machine's name and how many requests wait for an engine.

A client that knows nothing of Cove reads only the OpenAI fields and ignores the rest."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any, Protocol

from app.routing.auto import AUTO
from models.library import InstalledModel


class Engine(Protocol):
    """What the listing reads of one of the pool's engines (app/serve/pool/engines.py Engine)."""

    @property
    def model(self) -> InstalledModel: ...
    @property
    def loading(self) -> bool: ...
    @property
    def slots(self) -> int: ...
    @property
    def leases(self) -> int: ...
    @property
    def exclusive(self) -> bool: ...


OWNER = "cove"
# Response headers of a chat completion: which machine and which model file served it, so the
# asking Cove's record names them (app/remote/engine.py reads them).
MACHINE_HEADER = "Cove-Machine"
SHA256_HEADER = "Cove-Model-Sha256"


def machine_name() -> str:
    """This machine's name as the person knows it (its host name without the domain)."""
    return socket.gethostname().split(".")[0] or "localhost"


def served_headers(model: InstalledModel) -> dict[str, str]:
    return {MACHINE_HEADER: machine_name(), SHA256_HEADER: model.sha256}


def model_entry(model: InstalledModel, engines: Iterable[Engine] = ()) -> dict[str, Any]:
    """The OpenAI entry of `model`, with Cove's `cove` object. `engines`: the pool's engines now."""
    mine = [e for e in engines if e.model.path == model.path]
    ready = [e for e in mine if not e.loading]
    free = sum(max(0, e.slots - e.leases) for e in ready if not e.exclusive)
    return {
        "id": model.name,
        "object": "model",
        "created": 0,
        "owned_by": OWNER,
        OWNER: {
            "sha256": model.sha256,
            "context_length": model.context_length,
            "vision": model.vision,
            "loaded": bool(ready),
            "loading": bool(mine) and not ready,
            "slots": sum(e.slots for e in ready),
            "free_slots": free,
        },
    }


def auto_entry(models: Iterable[InstalledModel]) -> dict[str, Any]:
    """The entry of "auto": a request naming it gets the model Auto chooses among `models`."""
    return {
        "id": AUTO,
        "object": "model",
        "created": 0,
        "owned_by": OWNER,
        OWNER: {"auto": True, "chooses_among": [m.name for m in models]},
    }


def listing(models: Iterable[InstalledModel], engines: Iterable[Engine], waiting: int) -> dict[str, Any]:
    running, installed = list(engines), list(models)
    return {
        "object": "list",
        "data": ([auto_entry(installed)] if installed else []) + [model_entry(m, running) for m in installed],
        OWNER: {"machine": machine_name(), "waiting": waiting},
    }
