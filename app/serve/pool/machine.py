"""What the engine pool knows of this machine and of a model: its estimated RAM (Cove's memory
estimate, split into what copies of a model share and what each adds), the RAM free now, and
the physical cores."""

from __future__ import annotations

import os
from dataclasses import dataclass

from app.settings import ModelPlacement
from models.library import InstalledModel
from models.memory_records import MachineMemory


@dataclass(frozen=True)
class Footprint:
    """A model's estimated RAM: the weights (shared by every copy: they are mapped from the file)
    and what each engine process adds (KV cache for all its slots, compute buffers, the process itself)."""

    weights: int
    per_engine: int


def estimated_footprint(model: InstalledModel, n_ctx: int | None, placement: ModelPlacement | None = None, *, slots: int = 1) -> Footprint:
    """Cove's memory estimate of `model` on this machine, with its KV cache types and flash
    attention (`placement`) and `slots` conversations of `n_ctx` tokens held at once, split into
    what copies share and what each adds."""
    from models.gguf_validate import read_gguf_header
    from models.memory_estimate import estimate_memory
    from models.projector import installed_projector_cost

    p = placement or ModelPlacement()
    est = estimate_memory(
        read_gguf_header(model.path),
        model.size,
        n_ctx,
        kv_type=p.type_k,
        type_v=p.type_v,
        flash_attn=p.flash_attn is not False,
        slots=slots,
        projector=installed_projector_cost(model),  # the projector's weights and compute buffer
    )
    return Footprint(weights=est.weights_ram, per_engine=max(0, est.total_ram - est.weights_ram))


def default_slots(
    model: InstalledModel, n_ctx: int | None, placement: ModelPlacement | None = None, machine: MachineMemory | None = None
) -> int:
    """The `parallel` Cove gives `model` by default: models.slots.default_parallel for its load
    settings (`placement`: cache types, flash attention, GPU layers as Cove would choose them) at
    `n_ctx` tokens a slot, against `machine` (None: this machine's memory available now)."""
    from models.gguf_validate import read_gguf_header
    from models.load_estimate import estimate_load
    from models.memory_estimate import machine_memory
    from models.projector import installed_projector_cost

    p = placement or ModelPlacement()
    load = estimate_load(
        read_gguf_header(model.path),
        model.size,
        n_ctx,
        machine or machine_memory(),
        type_k=p.type_k,
        type_v=p.type_v,
        flash_attn=p.flash_attn,
        gpu_layers=p.gpu_layers,
        slots=None,
        projector=installed_projector_cost(model),
    )
    return load.estimate.slots


def physical_cores() -> int:
    import psutil

    n = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        n = min(n, len(os.sched_getaffinity(0)))
    return max(1, n)


def available_ram() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
