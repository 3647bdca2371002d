"""app/serve/pool/machine.py with slots: the footprint of an engine holding several conversations adds
their KV caches to what each engine costs (the weights stay shared), and the default `parallel`
for an installed model on a given machine."""

from __future__ import annotations

from app.serve.pool.machine import default_slots, estimated_footprint
from app.settings import ModelPlacement
from models.memory_estimate import MachineMemory
from tests.support.tiny_model import N_EMBD, N_LAYER

ROOMY = MachineMemory(total_ram=64 * 10**9, available_ram=60 * 10**9, vram_total=None)


def test_the_footprint_counts_every_slots_kv_cache(cove_core) -> None:
    model = cove_core.library.get("tiny-llama")
    one, four = estimated_footprint(model, 512), estimated_footprint(model, 512, slots=4)
    assert one == estimated_footprint(model, 512, ModelPlacement(), slots=1)
    assert four.weights == one.weights
    assert four.per_engine - one.per_engine >= 3 * 512 * N_LAYER * 2 * N_EMBD * 2  # three more f16 caches
    q8 = estimated_footprint(model, 512, ModelPlacement(type_k="q8_0", type_v="q8_0", flash_attn=True), slots=4)
    assert q8.per_engine < four.per_engine


def test_the_default_slots_follow_the_memory_available(cove_core) -> None:
    model = cove_core.library.get("tiny-llama")
    assert default_slots(model, 512, machine=ROOMY) == 4
    small = MachineMemory(total_ram=10**6, available_ram=10**6, vram_total=None)
    assert default_slots(model, 512, machine=small) == 1
