"""The engine host's placement (app/engine/host/placement_run.py) with the devices and the memory
figures injected at the boundary: which device takes the layers, a load that runs out of
device memory retried with fewer layers, and the report the performance panel shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.devices import Device, gpu_of
from app.engine.host.llama_log import BufferReport
from app.engine.host.placement_run import is_out_of_memory, memory_limit, open_with_retries, over_limit, plan, report, within_limit
from models.memory_estimate import GPU_RUNTIME
from models.placement import MARGIN_MIN, Placement
from tests.support.tiny_model import write_tiny_gguf

GiB = 1024**3
CPU = Device("CPU", "AMD EPYC 7B13", "cpu", 20 * GiB, 24 * GiB, "CPU")
IGPU = Device("Vulkan1", "Intel(R) UHD Graphics 620", "igpu", 3 * GiB, 8 * GiB, "Vulkan")
GPU = Device("Vulkan0", "NVIDIA GeForce RTX 4060", "gpu", 7 * GiB, 8 * GiB, "Vulkan")


def test_the_layers_go_to_a_dedicated_gpu_before_an_integrated_one_and_never_to_the_cpu() -> None:
    assert gpu_of([CPU, IGPU, GPU]) is GPU
    assert gpu_of([CPU, IGPU]) is IGPU
    assert gpu_of([CPU]) is None


def test_a_tiny_model_fits_whole_on_a_gpu_and_a_set_count_is_kept(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    placed, n_layer = plan(model, 256, [CPU, GPU], None)
    assert placed.n_gpu_layers == n_layer + 1 and placed.reason == f"all {n_layer + 1} layers fit on Vulkan0"
    assert plan(model, 256, [CPU, GPU], 1)[0].n_gpu_layers == 1
    assert plan(model, 256, [CPU, GPU], -1)[0].n_gpu_layers == n_layer + 1
    assert plan(model, 256, [CPU], 5)[0].n_gpu_layers == 0  # no GPU: a set count cannot apply
    # The backend's own buffers (GPU_RUNTIME) and the margin left free count, not just the weights.
    tight = Device("Vulkan0", "small", "gpu", GPU_RUNTIME + MARGIN_MIN + 64 * 1024 * 1024, GiB, "Vulkan")
    assert plan(model, 256, [CPU, tight], None)[0].n_gpu_layers == n_layer + 1
    short = Device("Vulkan0", "small", "gpu", GPU_RUNTIME + MARGIN_MIN - 1, GiB, "Vulkan")
    assert plan(model, 256, [CPU, short], None)[0].n_gpu_layers == 0
    full = Device("Vulkan0", "busy", "gpu", 10 * 1024 * 1024, GiB, "Vulkan")
    assert plan(model, 256, [CPU, full], None)[0].n_gpu_layers == 0


def test_a_load_out_of_device_memory_retries_with_fewer_layers_and_says_so() -> None:
    tried: list[int] = []

    def open_model(layers: int) -> str:
        tried.append(layers)
        if layers > 12:
            raise ValueError("ggml_vulkan: Device memory allocation of size 1073741824 failed: ErrorOutOfDeviceMemory")
        return f"model with {layers}"

    model, layers, note = open_with_retries(open_model, 29, 28)
    assert tried == [29, 19, 12] and model == "model with 12" and layers == 12
    assert note == "loaded 12 of 29 layers on the GPU: the rest did not fit"


def test_other_load_errors_are_not_retried() -> None:
    tried: list[int] = []

    def open_model(layers: int) -> str:
        tried.append(layers)
        raise ValueError("Failed to load model from file: tiny.gguf")

    with pytest.raises(ValueError, match="Failed to load model"):
        open_with_retries(open_model, 29, 28)
    assert tried == [29]
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory")) and not is_out_of_memory(ValueError("bad magic"))


def test_the_report_names_the_device_the_layers_the_kv_cache_and_the_measured_vram() -> None:
    placed = Placement(29, 28, 3 * GiB, "all 29 layers fit on Vulkan0")
    after = [CPU, Device("Vulkan0", GPU.description, "gpu", 7 * GiB - 3 * GiB - 200 * 1024 * 1024, 8 * GiB, "Vulkan")]
    done = report([CPU, GPU], GPU, placed, 28, 29, True, "", after=after)
    assert (done.backend, done.device, done.n_layers, done.n_gpu_layers, done.kv_on_gpu) == (
        "vulkan",
        "NVIDIA GeForce RTX 4060",
        29,
        29,
        True,
    )
    assert done.vram_used == 3 * GiB + 200 * 1024 * 1024 and done.vram_estimate == 3 * GiB
    assert done.note == "all 29 layers fit on Vulkan0"
    nvml = report([CPU, GPU], GPU, placed, 28, 29, True, "", after=after, process_vram=lambda: 2 * GiB)
    assert nvml.vram_used == 2 * GiB  # the driver's own figure for this process comes first
    cpu = report([CPU], None, Placement(0, 28, 0, "no GPU: every layer runs on the CPU"), 28, 0, True, "")
    assert (cpu.backend, cpu.device, cpu.n_gpu_layers, cpu.kv_on_gpu, cpu.vram_used) == ("cpu", "AMD EPYC 7B13", 0, False, None)
    assert cpu.to_dict()["devices"][0]["name"] == "CPU"


def test_the_device_memory_limit_is_read_in_mib_and_bad_values_are_one_sentence() -> None:
    assert memory_limit({}) is None and memory_limit({"COVE_GPU_MEMORY_LIMIT_MB": " "}) is None
    assert memory_limit({"COVE_GPU_MEMORY_LIMIT_MB": "1.5"}) == 3 * 512 * 1024
    with pytest.raises(ValueError, match=r"^COVE_GPU_MEMORY_LIMIT_MB must be a number of MiB \(e.g. 4096\), not '4G'$"):
        memory_limit({"COVE_GPU_MEMORY_LIMIT_MB": "4G"})
    with pytest.raises(ValueError, match="must be more than 0 MiB"):
        memory_limit({"COVE_GPU_MEMORY_LIMIT_MB": "-1"})


def test_the_placement_plans_within_the_limit_and_a_load_past_it_is_out_of_memory() -> None:
    limited = within_limit([CPU, GPU], 2 * GiB)
    assert limited[0] == CPU and limited[1].free_bytes == 2 * GiB and limited[1].total_bytes == GPU.total_bytes
    assert within_limit([CPU, GPU], None) == [CPU, GPU]
    assert within_limit([CPU, GPU], 9 * GiB)[1].free_bytes == GPU.free_bytes
    assert over_limit(GiB, 2 * GiB, "Vulkan0") == "" and over_limit(3 * GiB, None, "Vulkan0") == ""
    past = over_limit(3 * GiB, 2 * GiB, "Vulkan0")
    assert past == (
        "out of memory under the device memory limit: llama.cpp allocated 3072 MiB on Vulkan0, COVE_GPU_MEMORY_LIMIT_MB is 2048"
    )
    assert is_out_of_memory(RuntimeError(past))


def test_what_llama_cpp_allocated_on_a_device_is_read_from_its_log() -> None:
    lines = [
        "load_tensors:   CPU_Mapped model buffer size =   170.00 MiB",
        "load_tensors:      Vulkan0 model buffer size =    65.00 MiB",
        "llama_context: Vulkan_Host  output buffer size =     1.00 MiB",
        "llama_kv_cache:    Vulkan0 KV buffer size =     6.00 MiB",
        "llama_kv_cache:    Vulkan0 KV buffer size =    30.00 MiB",
        "sched_reserve:    Vulkan0 compute buffer size =    33.50 MiB",
        "sched_reserve: Vulkan_Host compute buffer size =   514.50 MiB",
    ]
    report = BufferReport(lines)
    assert report.device_bytes("Vulkan0") == round(134.5 * 1024 * 1024)
    assert report.device_bytes("Vulkan1") == 0 and report.kv_bytes == 36 * 1024 * 1024
