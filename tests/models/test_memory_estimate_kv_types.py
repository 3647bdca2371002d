"""The memory estimate with separate K and V cache types: each cache is sized by its own type,
the totals follow, a quantized V without flash attention is refused (a quantized K is not), and
the advice keeps the chosen V type when it only changes the context."""

from __future__ import annotations

import pytest

from models.memory_estimate import MachineMemory, compute_parts, estimate_memory
from tests.models.test_memory_estimate import make_facts

GB = 10**9
BIG = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=None)


def _kv(type_k: str, type_v: str | None = None, **kw) -> int:
    f = make_facts(n_layer=4, n_head_kv=2, head=64)
    e = compute_parts(f, None, 4096, 0, type_k, type_v=type_v, machine_name="riscv64", **kw)
    return e.kv_ram + e.kv_vram


def test_each_cache_is_sized_by_its_own_type() -> None:
    # 4 layers x 4096 cells x 128 values (2 heads x 64) per cache.
    values = 4 * 4096 * 128
    f16_half = values * 2  # one cache at 2 bytes a value
    q8_half = values // 32 * 34  # 34 bytes per block of 32
    q4_half = values // 32 * 18
    assert _kv("f16") == 2 * f16_half
    assert _kv("q8_0") == 2 * q8_half
    assert _kv("q4_0") == 2 * q4_half
    assert _kv("q8_0", "f16") == q8_half + f16_half
    assert _kv("f16", "q4_0") == f16_half + q4_half
    assert _kv("q4_0", "q8_0") == q4_half + q8_half


def test_the_totals_follow_the_types_and_the_record_names_both() -> None:
    f = make_facts()
    f16 = compute_parts(f, None, 4096, 0, "f16", machine_name="riscv64")
    mixed = compute_parts(f, None, 4096, 0, "q8_0", type_v="f16", machine_name="riscv64")
    assert f16.total_ram - mixed.total_ram == f16.kv_ram - mixed.kv_ram > 0
    assert (mixed.kv_type, mixed.type_v, mixed.kv_types) == ("q8_0", "f16", "K q8_0, V f16")
    assert (f16.type_v, f16.kv_types) == ("f16", "f16")


def test_a_quantized_v_needs_flash_attention_but_a_quantized_k_does_not() -> None:
    with pytest.raises(ValueError, match="V cache needs flash attention"):
        _kv("f16", "q8_0", flash_attn=False)
    with pytest.raises(ValueError, match="unknown KV cache type 'q3'"):
        _kv("f16", "q3")
    assert _kv("q8_0", "f16", flash_attn=False) < _kv("f16", flash_attn=False)


def test_the_advice_keeps_the_v_type_when_only_the_context_changes() -> None:
    f = make_facts(n_layer=8, n_head_kv=8)
    at_2048 = compute_parts(f, None, 2048, 0, "q4_0", type_v="q8_0", machine_name="riscv64")
    room = at_2048.total_ram + 1000  # 2048 tokens fit with these types, 4096 do not
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 4096, kv_type="q4_0", type_v="q8_0", machine=machine, machine_name="riscv64")
    assert e.verdict == "too large" and e.kv_types == "K q4_0, V q8_0"
    assert any("A context of 2048 tokens would fit" in a for a in e.advice), e.advice
    assert estimate_memory(f, None, 2048, kv_type="q4_0", type_v="q8_0", machine=machine, machine_name="riscv64").verdict == "fits in RAM"


def test_a_q8_suggestion_is_made_for_an_f16_v_cache() -> None:
    f = make_facts(n_layer=8, n_head_kv=8)
    room = compute_parts(f, None, 8192, 0, "q8_0", machine_name="riscv64").total_ram + 1000
    machine = MachineMemory(total_ram=room, available_ram=room, vram_total=None)
    e = estimate_memory(f, None, 8192, kv_type="q8_0", type_v="f16", machine=machine, machine_name="riscv64")
    assert e.verdict == "too large" and any("--kv-type q8_0" in a for a in e.advice), e.advice
    assert estimate_memory(f, None, 8192, kv_type="q8_0", machine=BIG, machine_name="riscv64").verdict == "fits in RAM"


def test_a_quantized_cache_lets_more_layers_onto_the_gpu() -> None:
    from models.placement import choose_layers, usable

    f = make_facts(n_layer=8, n_embd=2048, n_ff=5632, n_head_kv=8, head=128)
    f16_all = compute_parts(f, None, 16384, 9, "f16").total_vram
    q8_all = compute_parts(f, None, 16384, 9, "q8_0").total_vram
    middle = (f16_all + q8_all) // 2
    free = next(x for x in range(middle, 4 * middle, 1 << 20) if usable(x) >= middle)  # room for q8_0's workload only
    assert q8_all <= usable(free) < f16_all
    assert choose_layers(f, None, 16384, "q8_0", free, "GPU").all_on_gpu
    assert not choose_layers(f, None, 16384, "f16", free, "GPU").all_on_gpu
    mixed = choose_layers(f, None, 16384, "q8_0", free, "GPU", type_v="f16").n_gpu_layers
    assert choose_layers(f, None, 16384, "f16", free, "GPU").n_gpu_layers <= mixed <= 9
