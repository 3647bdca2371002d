"""The window's own engine while the server runs in the window: API requests for the model the
window has loaded run on it beside the window's turn, in its slots. One slot stays free for the
window's turn (when it has more than one, and the person has the window's reply go first), so
the person's reply never waits for the API; a turn
of the window for another model has the engine alone (it loads that model), once the API requests
on it have ended, and no new one starts on it meanwhile. The pool never unloads it."""

from __future__ import annotations

from collections.abc import Callable

from app.engine.client import EngineClient
from app.serve.pool.engines import Engine, Lease
from app.serve.pool.fair_queue import Waiter
from app.serve.pool.machine import Footprint
from models.library import InstalledModel


class WindowShare:
    def __init__(self, client: EngineClient, window_first: Callable[[], bool] = lambda: True) -> None:
        self.window_first = window_first  # the person's choice, read as each request starts
        self.engine = Engine(_NO_MODEL, client, Footprint(0, 0), loading=False)  # leases: the API's on it
        self.turn: Lease | None = None  # the window's turn on it now
        self.waiter: Waiter | None = None  # the window's turn waiting for it

    def path(self) -> str | None:
        loaded = self.engine.client.loaded
        return loaded.path if loaded is not None else None

    def slots(self) -> int:
        loaded = self.engine.client.loaded
        return max(1, loaded.slots) if loaded is not None else 1  # the slots the host made

    def _api_slots(self) -> int:
        """The slots API requests may take: all but the window's turn's, or the one kept for it."""
        slots = self.slots()
        return slots - 1 if self.turn is not None or (slots > 1 and self.window_first()) else slots

    def lends(self, path: str) -> bool:
        """API requests for `path` run on the window's engine (now, or once a slot is free)."""
        if self.path() != path or (self.turn is not None and self.turn.exclusive):
            return False
        if self.waiter is not None and self.waiter.model.path != path:
            return False  # the window is about to load another model
        # The window uses its engine outside any turn of the pool's (it loads a model): not now.
        return not (self.turn is None and self.engine.leases == 0 and self.engine.client.busy)

    def takes(self, path: str, exclusive: bool) -> bool:
        """An API request for `path` may start on the window's engine now."""
        if not self.lends(path) or self.waiter is not None or (exclusive and self.turn is not None):
            return False
        return self.engine.can_take(exclusive, self._api_slots())

    def grant_turn(self) -> bool:
        """Give the waiting turn of the window its engine if it can have it now: beside the API's
        requests for the model it has loaded, or alone for another."""
        waiter, engine = self.waiter, self.engine
        if waiter is None or self.turn is not None:
            return False
        if self.path() == waiter.model.path and not engine.exclusive and engine.leases < self.slots():
            lease = Lease(engine, window=True)
        elif engine.leases == 0:
            lease = Lease(engine, exclusive=True, window=True)
        else:
            return False
        self.waiter, self.turn, waiter.lease = None, lease, lease
        waiter.ready.set()
        return True

    def end_turn(self, lease: Lease) -> None:
        if self.turn is lease:
            self.turn = None


_NO_MODEL = InstalledModel(
    name="",
    path="",
    sha256="",
    size=0,
    mtime=0.0,
    quant=None,
    architecture=None,
    parameter_count=None,
    context_length=None,
    has_chat_template=False,
    source="imported",
    repo=None,
    file=None,
    revision=None,
    added_at="",
    last_used_at=None,
)
