"""This machine's memory as the memory estimate judges against it: RAM, and the GPU llama.cpp
would offload to, which NVML finds for NVIDIA and the engine process for every other maker."""

from __future__ import annotations

from dataclasses import replace

from app.engine.client import EngineClient, EngineError
from app.engine.devices import Device, gpu_of
from models.memory_records import MachineMemory


def with_engine_gpu(machine: MachineMemory) -> MachineMemory:
    """`machine` with the memory of the GPU llama.cpp would offload to, asked of an engine
    process, when NVML found none (a GPU of another maker, through Vulkan or Metal)."""
    if machine.vram_total is not None:
        return machine
    try:
        with EngineClient() as engine:
            found = engine.devices()
    except EngineError:
        return machine
    gpu = gpu_of([Device(**d) for d in found])
    if gpu is None:
        return machine
    return replace(machine, vram_total=gpu.total_bytes, vram_free=gpu.free_bytes)
