"""The memory estimate with slots (the engine's `parallel`): the KV cache grows by a whole context
per slot, the compute buffer does not, one slot is the estimate as it always was, too many slots
are advised down, and the default `parallel` is as many as fit (1..4 on a CPU, up to 8 on a GPU)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.load_estimate import estimate_load
from models.memory_estimate import CONTEXT_TOKEN_PYTHON, MachineMemory, compute_parts, estimate_memory
from models.slots import CPU_SLOTS, GPU_SLOTS, HEADROOM, default_parallel, slot_limit
from tests.models.test_memory_estimate import make_facts

GB = 10**9
BIG = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=None)
BIG_GPU = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=24 * GB, vram_free=24 * GB)


def parts(n_ctx: int = 2048, slots: int = 1, **kw):  # type: ignore[no-untyped-def]
    return compute_parts(make_facts(**kw.pop("facts", {})), None, n_ctx, kw.pop("ngl", 0), "f16", machine_name="riscv64", slots=slots, **kw)


def test_one_slot_is_the_estimate_as_before() -> None:
    f = make_facts()
    plain = compute_parts(f, None, 2048, 0, "f16", machine_name="riscv64")
    assert plain == compute_parts(f, None, 2048, 0, "f16", machine_name="riscv64", slots=1) and plain.slots == 1
    with pytest.raises(ValueError, match="at least 1"):
        parts(slots=0)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"flash_attn": False},
        {"kv_type": "q8_0"},
        {"ngl": 3},
        {"facts": {"swa": (True, False, True, False), "n_swa": 512}, "swa_full": False},
    ],
)
def test_each_slot_adds_a_whole_kv_cache_and_no_compute(kw: dict) -> None:
    kv = kw.pop("kv_type", "f16")
    one = parts(slots=1, type_v=kv, **dict(kw))
    four = parts(slots=4, type_v=kv, **dict(kw))
    assert four.slots == 4 and four.n_ctx == one.n_ctx == 2048 and four.n_ubatch == one.n_ubatch
    assert (four.kv_ram, four.kv_vram) == (4 * one.kv_ram, 4 * one.kv_vram)
    assert (four.compute_ram, four.compute_vram) == (one.compute_ram, one.compute_vram)  # one micro-batch's graph
    assert four.weights_ram == one.weights_ram and four.weights_vram == one.weights_vram
    assert four.overhead - one.overhead >= 3 * 2048 * CONTEXT_TOKEN_PYTHON  # each slot's conversation's tokens
    assert four.total_ram == four.weights_ram + four.kv_ram + four.compute_ram + four.overhead
    assert four.loaded_ram - one.loaded_ram == (four.kv_ram - one.kv_ram) + (four.overhead - one.overhead) - 3 * 2048 * CONTEXT_TOKEN_PYTHON


def test_too_many_slots_are_advised_down_first() -> None:
    f = make_facts()
    room = (parts(slots=2).total_ram + parts(slots=3).total_ram) // 2  # two fit, three do not
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 2048, machine=machine, machine_name="riscv64", slots=4)
    assert e.verdict == "too large" and e.slots == 4
    assert e.advice == ("2 of 4 slots would fit (--parallel 2): 2 conversations at a time at 2048 tokens each.",)
    assert estimate_memory(f, None, 2048, machine=machine, machine_name="riscv64", slots=2).verdict == "fits in RAM"
    tight = MachineMemory(total_ram=parts(slots=1).total_ram, available_ram=parts(slots=1).total_ram, vram_total=None)
    one = estimate_memory(f, None, 2048, machine=tight, machine_name="riscv64", slots=3).advice
    assert one[0].startswith("1 of 3 slots would fit (--parallel 1): one conversation at a time")


def test_the_default_is_as_many_slots_as_fit_up_to_the_limit() -> None:
    f = make_facts()
    assert (slot_limit(False), slot_limit(True)) == (CPU_SLOTS, GPU_SLOTS) == (4, 8)
    assert default_parallel(f, None, 2048, BIG, machine_name="riscv64") == 4
    assert default_parallel(f, None, 2048, BIG_GPU, n_gpu_layers=-1, machine_name="riscv64") == 8
    assert default_parallel(f, None, 2048, BIG, n_gpu_layers=-1, machine_name="riscv64") == 4  # no GPU: the CPU's limit
    for fitting in (1, 2, 3):  # room for `fitting` slots within the headroom, not one more
        room = int(parts(slots=fitting).total_ram / HEADROOM) + 1
        machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
        assert default_parallel(f, None, 2048, machine, machine_name="riscv64") == fitting
    nothing = MachineMemory(total_ram=10**6, available_ram=10**6, vram_total=None)
    assert default_parallel(f, None, 2048, nothing, machine_name="riscv64") == 1  # always at least one


def test_a_longer_context_or_less_vram_leaves_fewer_slots() -> None:
    f = make_facts(n_layer=8, n_head_kv=8)
    room = int(parts(2048, 4, facts={"n_layer": 8, "n_head_kv": 8}).total_ram / HEADROOM) + 1
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    assert default_parallel(f, None, 2048, machine, machine_name="riscv64") == 4
    assert default_parallel(f, None, 8192, machine, machine_name="riscv64") < 4
    on_gpu = compute_parts(f, None, 2048, -1, "f16", machine_name="riscv64", slots=5)
    vram = int(on_gpu.total_vram / HEADROOM) + 1
    gpu = replace(BIG_GPU, vram_total=vram, vram_free=vram)
    assert default_parallel(f, None, 2048, gpu, n_gpu_layers=-1, machine_name="riscv64") == 5
    q8 = default_parallel(f, None, 2048, gpu, n_gpu_layers=-1, kv_type="q8_0", type_v="q8_0", machine_name="riscv64")
    assert q8 > 5  # half the cache a slot


def test_the_load_estimate_counts_the_default_slots_when_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from models.gguf_validate import read_gguf_header
    from tests.support.tiny_model import write_tiny_gguf

    header = read_gguf_header(write_tiny_gguf(tmp_path / "tiny.gguf"))
    one = estimate_load(header, None, 512, BIG)
    auto = estimate_load(header, None, 512, BIG, slots=None)
    assert (one.estimate.slots, auto.estimate.slots) == (1, 4)
    assert auto.kv_bytes == 4 * one.kv_bytes and auto.kv_f16 == 4 * one.kv_f16
    assert estimate_load(header, None, 512, BIG, slots=2).estimate.slots == 2
