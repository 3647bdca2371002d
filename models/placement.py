"""Where a model's layers go: how many of them a GPU takes, from the memory estimate
(weights, KV cache and compute buffer per device) and the device's free memory.

A model file that fits in VRAM is not a workload that fits: the KV cache of the context and
the compute buffer come on top, so the choice is made on the estimate's whole VRAM figure,
with a margin for the driver and other programs.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.memory_estimate import compute_parts
from models.model_facts import ModelFacts

# Kept free on the device: other programs, the desktop, and the estimate's own error.
MARGIN_FRACTION = 0.10
MARGIN_MIN = 256 * 1024 * 1024


@dataclass(frozen=True)
class Placement:
    """How many layers go to the GPU (of `n_layers + 1`: the repeating layers and the output
    layer), the estimate's VRAM for that, and why, in a sentence."""

    n_gpu_layers: int
    n_layers: int  # repeating layers
    vram_bytes: int  # the estimate's VRAM for n_gpu_layers (0 on the CPU)
    reason: str

    @property
    def all_on_gpu(self) -> bool:
        return self.n_gpu_layers >= self.n_layers + 1


def usable(free_bytes: int) -> int:
    """Device memory a load may plan to use out of `free_bytes`."""
    return max(0, free_bytes - max(MARGIN_MIN, round(free_bytes * MARGIN_FRACTION)))


def choose_layers(
    facts: ModelFacts,
    file_size: int | None,
    n_ctx: int,
    kv_type: str,
    free_bytes: int | None,
    device: str,
    *,
    flash_attn: bool = True,
    type_v: str | None = None,
) -> Placement:
    """All layers on the GPU when the estimate fits in its usable memory, else the most that
    fit, else none. `free_bytes` None: no GPU. `kv_type` is the K cache's type, and the V
    cache's unless `type_v` is given."""
    total = facts.n_layer + 1
    if not free_bytes:
        return Placement(0, facts.n_layer, 0, "no GPU: every layer runs on the CPU")
    room = usable(free_bytes)

    def vram(ngl: int) -> int:
        return compute_parts(facts, file_size, n_ctx, ngl, kv_type, flash_attn=flash_attn, type_v=type_v).total_vram

    whole = vram(total)
    if whole <= room:
        return Placement(total, facts.n_layer, whole, f"all {total} layers fit on {device}")
    lo, hi = 0, total - 1  # the most layers whose estimate fits: vram() grows with ngl
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if vram(mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return Placement(0, facts.n_layer, 0, f"not one layer fits in the free memory of {device}: all run on the CPU")
    return Placement(lo, facts.n_layer, vram(lo), f"{lo} of {total} layers fit on {device}; the rest run on the CPU")


def fewer_layers(n_gpu_layers: int) -> int:
    """The layer count to try after a load that ran out of device memory with `n_gpu_layers`."""
    return 0 if n_gpu_layers <= 2 else n_gpu_layers * 2 // 3
