"""The memory one model would take with the load settings a person chose, before it is loaded:
the estimate (models/memory_estimate.py) for those K and V cache types, flash attention and GPU
layers at the context Cove would give it and the slots it would hold, with the f16 cache beside it
for comparison. The load settings dialog and `cove models place` show it."""

from __future__ import annotations

from dataclasses import dataclass

from models.context_size import cove_context
from models.gguf_validate import GGUFHeader
from models.memory_estimate import compute_parts, estimate_memory
from models.memory_records import MachineMemory, MemoryEstimate
from models.model_facts import facts_from_header
from models.placement import choose_layers
from models.projector import ProjectorCost
from models.slots import default_parallel


@dataclass(frozen=True)
class LoadEstimate:
    estimate: MemoryEstimate  # with the chosen settings, judged against the machine
    kv_f16: int  # the same context's KV cache at f16, for all the slots (what the choice saves, or costs)

    @property
    def kv_bytes(self) -> int:
        return self.estimate.kv_ram + self.estimate.kv_vram


def estimate_load(
    header: GGUFHeader,
    file_size: int | None,
    n_ctx: int | None,
    machine: MachineMemory,
    *,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: bool | None = None,
    gpu_layers: int | None = None,
    slots: int | None = 1,
    projector: ProjectorCost | None = None,
) -> LoadEstimate:
    """The estimate for these settings. `flash_attn` None (llama.cpp's auto) counts as on, as it
    turns out on the CPU and on CUDA/Metal; `gpu_layers` None is the number Cove would choose for
    the machine's free VRAM (for one slot); `slots` None is models.slots.default_parallel for the
    rest. `projector`: a vision model's projector, counted as memory_estimate says. Raises ValueError
    for a quantized V with flash attention off."""
    facts = facts_from_header(header)
    fa = flash_attn is not False
    context = cove_context(n_ctx, facts.n_ctx_train)
    vram = machine.vram_free if machine.vram_free is not None else machine.vram_total
    if gpu_layers is None:
        layers = choose_layers(facts, file_size, context, type_k, vram, "the GPU", flash_attn=fa, type_v=type_v).n_gpu_layers
    else:
        layers = gpu_layers if vram else 0
    if slots is None:
        slots = default_parallel(facts, file_size, context, machine, n_gpu_layers=layers, kv_type=type_k, type_v=type_v, flash_attn=fa)
    estimate = estimate_memory(
        header, file_size, context, layers, type_k, machine, flash_attn=fa, type_v=type_v, slots=slots, projector=projector
    )
    f16 = compute_parts(facts, file_size, estimate.n_ctx, estimate.n_gpu_layers, "f16", flash_attn=fa, slots=slots, projector=projector)
    return LoadEstimate(estimate, f16.kv_ram + f16.kv_vram)
