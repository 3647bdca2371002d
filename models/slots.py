"""How many conversations one engine holds at once by default (its `parallel`, the slots): as
many as the memory estimate says fit beside the model at its context, at most CPU_SLOTS on a CPU
and GPU_SLOTS when its layers run on a GPU, and always at least one.

Each slot is a whole context of KV cache (models/memory_estimate.py, `slots`), so the answer
falls as the context grows. A slot beyond the first is only counted while the estimate stays
within HEADROOM of the memory available: the first slot is the model itself and the verdict
speaks for it; extra slots are a convenience that should not take the machine to its edge.
"""

from __future__ import annotations

from models.context_size import cove_context
from models.gguf_info import GGUFInfo
from models.gguf_validate import GGUFHeader
from models.memory_advice import TIGHT
from models.memory_estimate import as_facts, compute_parts
from models.memory_records import MachineMemory
from models.model_facts import ModelFacts

CPU_SLOTS = 4  # beyond this, a CPU's cores are the limit rather than its memory
GPU_SLOTS = 8
HEADROOM = TIGHT  # the share of the available memory that extra slots may bring the estimate to


def slot_limit(on_gpu: bool) -> int:
    """The most slots Cove gives a model by default: GPU_SLOTS on a GPU, else CPU_SLOTS."""
    return GPU_SLOTS if on_gpu else CPU_SLOTS


def default_parallel(
    info: ModelFacts | GGUFHeader | GGUFInfo,
    file_size: int | None,
    n_ctx: int | None,
    machine: MachineMemory,
    *,
    n_gpu_layers: int = 0,
    kv_type: str = "f16",
    type_v: str | None = None,
    flash_attn: bool = True,
    machine_name: str | None = None,
) -> int:
    """The slots (1..slot_limit) whose estimate fits `machine` at `n_ctx` tokens each (None:
    Cove's default context for the model) with these load settings; 1 when even two do not.

    Pure arithmetic on the header and `machine` (read neither here). `n_gpu_layers` as the
    engine will apply it (-1: all); it counts as on a GPU only when `machine` has one.
    """
    facts = as_facts(info)
    context = cove_context(n_ctx, facts.n_ctx_train)
    gpu = n_gpu_layers != 0 and machine.vram_total is not None
    ngl = n_gpu_layers if gpu else 0
    vram = machine.vram_free if machine.vram_free is not None else machine.vram_total

    def fits(slots: int) -> bool:
        e = compute_parts(
            facts, file_size, context, ngl, kv_type, flash_attn=flash_attn, machine_name=machine_name, type_v=type_v, slots=slots
        )
        if e.total_ram > machine.available_ram * HEADROOM:
            return False
        return ngl == 0 or (vram is not None and e.total_vram <= vram * HEADROOM)

    best = 1
    for slots in range(2, slot_limit(gpu) + 1):  # the estimate grows with each slot: stop at the first miss
        if not fits(slots):
            break
        best = slots
    return best
