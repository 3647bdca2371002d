"""Whether a model fits in this machine's memory beside the engines loaded now: its estimated
footprint with the slots it is loaded with, the RAM free now less what engines still loading will
take, and which idle engines of other models to unload (least recently used first) to make room."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.serve.pool import machine
from app.serve.pool.engines import Engine
from app.serve.pool.machine import Footprint
from app.settings import ModelPlacement
from models.library import InstalledModel

MEMORY_SHARE = 0.9  # of the RAM available when a model is loaded, what the pool lets itself use
UNKNOWN_WEIGHTS_FACTOR = 1.2  # a model whose estimate cannot be read: its file size and a fifth more


def estimate(model: InstalledModel, n_ctx: int | None, placement: ModelPlacement | None, slots: int) -> Footprint:
    """Cove's memory estimate of `model` with `slots` conversations' KV caches (each of `n_ctx`)."""
    return machine.estimated_footprint(model, n_ctx, placement, slots=slots)


def fitting_slots(model: InstalledModel, n_ctx: int | None, placement: ModelPlacement | None) -> int:
    """The slots `model`'s engine gets when `--parallel` is not given: as many as fit in memory
    by the estimate (at most 4 on a CPU)."""
    return machine.default_slots(model, n_ctx, placement)


@dataclass(frozen=True)
class Room:
    """What loading a model takes: `need` bytes, `free` once the `victims` are unloaded."""

    need: int
    free: int
    victims: tuple[Engine, ...]

    @property
    def fits(self) -> bool:
        return self.need <= self.free


class MemoryFit:
    def __init__(self, footprint_of: Callable[[InstalledModel], Footprint], available_ram: Callable[[], int] | None = None) -> None:
        self._footprint_of = footprint_of
        self._available_ram = available_ram or machine.available_ram

    def footprint(self, model: InstalledModel) -> tuple[Footprint, str | None]:
        """`model`'s estimated footprint, and a sentence when the estimate could not be read (the
        file's size and a fifth more stands in; the load itself will say what is wrong)."""
        try:
            return self._footprint_of(model), None
        except Exception as exc:  # noqa: BLE001 - a file that cannot be read
            return Footprint(int(model.size * UNKNOWN_WEIGHTS_FACTOR), 0), f"no memory estimate for {model.name}: {exc}"

    def room(self, model: InstalledModel, footprint: Footprint, engines: list[Engine]) -> Room:
        """The room `model` needs and finds beside `engines`, unloading idle engines of other
        models, least recently used first, until it fits (all of them when it never does)."""
        need = footprint.weights + footprint.per_engine
        loading = sum(e.footprint.weights + e.footprint.per_engine for e in engines if e.loading)
        free = int(self._available_ram() * MEMORY_SHARE) - loading
        idle = sorted((e for e in engines if not e.busy and not e.loading and e.model.path != model.path), key=lambda e: e.last_used)
        victims: list[Engine] = []
        while need > free and idle:
            victim = idle.pop(0)
            victims.append(victim)
            free += victim.footprint.weights + victim.footprint.per_engine
        return Room(need, free, tuple(victims))
