"""The requests waiting for an engine, fair across clients: for each model, the next one served
is the oldest request of the client served longest ago (a client never served comes first), so
a script that queues many requests does not make an editor's one wait behind all of them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import anyio

from app.serve.http.errors import ApiError
from app.serve.pool.engines import Lease
from models.library import InstalledModel


@dataclass(eq=False)
class Waiter:
    """One request waiting for an engine with its model; `ready` is set once it has a lease or
    an error."""

    model: InstalledModel
    client: str
    arrival: int
    exclusive: bool = False  # it needs the engine alone (an embedding request)
    ready: anyio.Event = field(default_factory=anyio.Event)
    lease: Lease | None = None
    error: ApiError | None = None


class FairQueue:
    def __init__(self) -> None:
        self._waiters: list[Waiter] = []
        self._served: dict[tuple[str, str], int] = {}  # (model path, client) -> when it was last served
        self._ticks = itertools.count()

    def __len__(self) -> int:
        return len(self._waiters)

    def join(self, model: InstalledModel, client: str, *, exclusive: bool = False) -> Waiter:
        waiter = Waiter(model, client, next(self._ticks), exclusive)
        self._waiters.append(waiter)
        return waiter

    def leave(self, waiter: Waiter) -> bool:
        """Take `waiter` out of the queue; False when it was not waiting any more."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)
            return True
        return False

    def paths(self) -> set[str]:
        """The model files requests are waiting for."""
        return {w.model.path for w in self._waiters}

    def next_for(self, path: str) -> Waiter | None:
        """The request for `path` to serve next: the oldest of the client served longest ago."""
        heads: dict[str, Waiter] = {}
        for w in self._waiters:  # in order of arrival
            if w.model.path == path:
                heads.setdefault(w.client, w)
        return min(heads.values(), key=lambda w: (self._served.get((path, w.client), -1), w.arrival), default=None)

    def grant(self, waiter: Waiter, lease: Lease) -> None:
        self._waiters.remove(waiter)
        self._served[(waiter.model.path, waiter.client)] = next(self._ticks)
        waiter.lease = lease
        waiter.ready.set()

    def fail(self, path: str, error: ApiError) -> None:
        """Every request waiting for `path` ends with `error`."""
        for waiter in [w for w in self._waiters if w.model.path == path]:
            self._waiters.remove(waiter)
            waiter.error = error
            waiter.ready.set()
