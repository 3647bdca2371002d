"""An engine process as the API pool sees it (`Engine`: one model, its slots and the requests on
them) and the loan of one to a request (`Lease`). One process per model: it decodes up to
`slots` replies at once, so that many leases share it; a lease that must have it alone (an
embedding request, the window loading another model) is `exclusive`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.engine.client import EngineClient, LoadedModel
from app.load_options import LoadOptions
from app.serve.pool.machine import Footprint
from models.library import InstalledModel


@dataclass(eq=False)
class Engine:
    """One engine process with one model, as the pool sees it."""

    model: InstalledModel
    client: EngineClient
    footprint: Footprint
    slots: int = 1  # replies it decodes at once: the slots asked for, then those the host made
    loading: bool = True
    leases: int = 0  # requests lent it now
    exclusive: bool = False  # one lease holds it alone
    last_used: float = field(default_factory=time.monotonic)
    loaded: LoadedModel | None = None
    stamp: tuple[int, int, int] | None = None  # the model file as it was when the load began
    options: LoadOptions = field(default_factory=LoadOptions)  # the model's load settings, read when it was spawned

    @property
    def busy(self) -> bool:
        return self.leases > 0

    def can_take(self, exclusive: bool, capacity: int | None = None) -> bool:
        """Another lease fits now: a free slot (of `capacity`, or all of them), or the engine
        unused when the lease must have it alone."""
        if self.loading or self.exclusive:
            return False
        return self.leases == 0 if exclusive else self.leases < (self.slots if capacity is None else capacity)

    def take(self, exclusive: bool) -> None:
        self.leases += 1
        self.exclusive = exclusive
        self.last_used = time.monotonic()

    def give_back(self) -> None:
        self.leases = max(0, self.leases - 1)
        self.exclusive = False
        self.last_used = time.monotonic()


class Lease:
    """An engine lent to one request (or to a turn of the window: `window`); give it back with
    `pool.release(lease)`, once."""

    def __init__(self, engine: Engine, *, exclusive: bool = False, window: bool = False) -> None:
        self.engine, self.exclusive, self.window = engine, exclusive, window
        self.released = False

    @property
    def client(self) -> EngineClient:
        return self.engine.client
