"""The records of a memory estimate: what a machine has, and what a model would take on it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineMemory:
    total_ram: int
    available_ram: int
    vram_total: int | None  # None: no GPU that llama.cpp could offload to was found
    vram_free: int | None = None


@dataclass(frozen=True)
class MemoryEstimate:
    weights_ram: int
    weights_vram: int
    kv_ram: int
    kv_vram: int
    compute_ram: int  # with the context full
    compute_vram: int
    overhead: int  # RAM: engine process, tokenizer tables, sampling, logits row, context bookkeeping
    total_ram: int  # peak with the context full; the verdict uses this
    total_vram: int
    n_ctx: int  # as llama.cpp will make it (padded to 256)
    n_gpu_layers: int  # as applied (0 when this machine has no GPU to offload to)
    kv_type: str  # the K cache's type (and the V cache's unless type_v differs)
    verdict: str  # "fits on GPU" | "fits in RAM" | "too large"
    advice: tuple[str, ...]
    loaded_ram: int = 0  # after loading and a short first reply (the context still nearly empty)
    overhead_vram: int = 0
    n_ubatch: int = 0
    n_layers: int = 0  # repeating layers; n_gpu_layers can go to n_layers + 1 (the output layer)
    repacked_ram: int = 0  # part of weights_ram: the CPU backend's private re-packed copies
    # File pages that stay mapped and resident after loading but are never read again (those
    # of re-packed or GPU-offloaded tensors lying between tensors read from the mapping); the
    # system drops them first when memory is short. Not in the totals; a process monitor shows them.
    reclaimable_ram: int = 0
    available_ram: int | None = None
    available_vram: int | None = None
    exact: bool = True  # False when no tensor table was known (weights spread evenly)
    type_v: str = ""  # the V cache's type ("" in a record made without one: the same as kv_type)
    slots: int = 1  # sequences held at once, each with its own n_ctx cells (llama.cpp's non-unified KV)

    @property
    def kv_types(self) -> str:
        """The cache types in words: "q8_0" when K and V match, else "K q8_0, V f16"."""
        v = self.type_v or self.kv_type
        return self.kv_type if v == self.kv_type else f"K {self.kv_type}, V {v}"
