"""Placement (models/placement.py): how many layers a GPU takes, chosen from the memory
estimate and a device's free memory, which are injected here (no GPU on the test machine)."""

from __future__ import annotations

from models.memory_estimate import compute_parts
from models.placement import MARGIN_MIN, choose_layers, fewer_layers, usable
from tests.models.test_memory_estimate import make_facts

MiB = 1024 * 1024


def vram(facts, ngl: int, n_ctx: int = 4096) -> int:
    return compute_parts(facts, None, n_ctx, ngl, "f16").total_vram


def test_all_layers_go_to_a_gpu_with_room_for_weights_kv_and_compute() -> None:
    facts = make_facts(n_layer=8, n_embd=2048, n_ff=5632, n_vocab=32000)
    whole = vram(facts, 9)
    placement = choose_layers(facts, None, 4096, "f16", whole * 2, "Vulkan0")
    assert placement.n_gpu_layers == 9 and placement.all_on_gpu and placement.vram_bytes == whole
    assert placement.reason == "all 9 layers fit on Vulkan0"


def test_a_model_file_that_fits_is_not_a_workload_that_fits() -> None:
    # Free memory above the weights, below weights + KV cache + compute buffer: not all layers.
    facts = make_facts(n_layer=8, n_embd=2048, n_ff=5632, n_vocab=32000)
    weights = compute_parts(facts, None, 4096, 9, "f16").weights_vram
    free = weights + MARGIN_MIN + 2 * 1024 * 1024 + weights // 10 + 1
    placement = choose_layers(facts, None, 32768, "f16", free, "CUDA0")
    assert 0 < placement.n_gpu_layers < 9
    assert placement.vram_bytes <= usable(free) < vram(facts, placement.n_gpu_layers + 1, 32768)
    assert placement.reason == f"{placement.n_gpu_layers} of 9 layers fit on CUDA0; the rest run on the CPU"


def test_the_most_layers_that_fit_are_chosen() -> None:
    facts = make_facts(n_layer=8, n_embd=2048, n_ff=5632, n_vocab=32000)
    seen = set()
    for free in range(MARGIN_MIN, 2 * vram(facts, 9) + MARGIN_MIN, 8 * MiB):
        chosen = choose_layers(facts, None, 4096, "f16", free, "GPU").n_gpu_layers
        assert chosen == 0 or vram(facts, chosen) <= usable(free)
        assert chosen == 9 or vram(facts, chosen + 1) > usable(free)
        seen.add(chosen)
    assert len(seen) >= 5  # the sweep met partial placements, not only none and all


def test_no_gpu_or_no_room_puts_every_layer_on_the_cpu() -> None:
    facts = make_facts(n_layer=8, n_embd=2048, n_ff=5632, n_vocab=32000)
    assert choose_layers(facts, None, 4096, "f16", None, "GPU").n_gpu_layers == 0
    small = choose_layers(facts, None, 4096, "f16", MARGIN_MIN + MiB, "Vulkan0")
    assert small.n_gpu_layers == 0 and "not one layer fits" in small.reason


def test_a_load_that_ran_out_of_device_memory_retries_with_fewer_layers_down_to_none() -> None:
    tried = [29]
    while tried[-1]:
        tried.append(fewer_layers(tried[-1]))
    assert tried == [29, 19, 12, 8, 5, 3, 2, 0]
