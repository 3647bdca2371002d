"""Placement in the engine host: which device a model's layers go to, chosen from the devices
llama.cpp sees and the memory estimate, a retry with fewer layers when the device runs out of
memory (or past the device memory limit the person set), and the report of where everything
ended up (shown in the performance panel and in `cove chat --json`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from app.engine.devices import Device, gpu_of
from app.engine.host.llama_log import BufferReport
from models.context_size import cove_context
from models.gguf_validate import read_gguf_header
from models.model_facts import facts_from_header
from models.placement import Placement, choose_layers, fewer_layers

T = TypeVar("T")

# A cap on the device memory a model may take (MiB), for a GPU shared with other programs: the
# placement plans within it, and a load whose buffers on the device go past it is retried with fewer layers.
LIMIT_ENV = "COVE_GPU_MEMORY_LIMIT_MB"
_MIB = 1024 * 1024

# Words in llama.cpp's and the backends' errors when a device has no memory left.
_OUT_OF_MEMORY = (
    "out of memory",
    "outofdevicememory",
    "failed to allocate",
    "unable to allocate",
    "cudamalloc",
    "alloc_buffer",
    "not enough memory",
    "failed to create context",
    "llama_context",
)


@dataclass(frozen=True)
class PlacementReport:
    """Where the load put the model: JSON-ready for the Loaded message."""

    backend: str  # "cpu", "vulkan", "cuda", "metal", ...
    device: str  # the device's description ("CPU" when no GPU took layers)
    n_layers: int  # layers that can be offloaded (the repeating ones and the output layer)
    n_gpu_layers: int
    kv_on_gpu: bool
    note: str  # a sentence on how the layer count was chosen
    vram_estimate: int | None = None  # the estimate's device memory before loading
    vram_used: int | None = None  # measured after loading, when the device can tell
    devices: list[dict[str, Any]] = field(default_factory=list)
    extra_buffers: bool = True  # llama.cpp could move weights into AMX or repacked buffers (cpu_quirks.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "n_layers": self.n_layers,
            "n_gpu_layers": self.n_gpu_layers,
            "kv_on_gpu": self.kv_on_gpu,
            "note": self.note,
            "vram_estimate": self.vram_estimate,
            "vram_used": self.vram_used,
            "devices": self.devices,
            "extra_buffers": self.extra_buffers,
        }


def plan(
    path: Path,
    n_ctx: int | None,
    devices: list[Device],
    requested: int | None,
    *,
    flash_attn: bool = True,
    type_k: str = "f16",
    type_v: str = "f16",
) -> tuple[Placement, int]:
    """(the placement, the repeating layers' count) for the model at `path`: `requested` when
    the person set a layer count, else what the estimate says fits on the GPU."""
    header = read_gguf_header(path)
    facts = facts_from_header(header)
    gpu = gpu_of(devices)
    if requested is not None:
        ngl = 0 if gpu is None else min(max(requested, 0) if requested >= 0 else facts.n_layer + 1, facts.n_layer + 1)
        reason = "no GPU: every layer runs on the CPU" if gpu is None else f"{ngl} layers on {gpu.name}, as set"
        return Placement(ngl, facts.n_layer, 0, reason), facts.n_layer
    context = cove_context(n_ctx, facts.n_ctx_train)
    placed = choose_layers(
        facts,
        path.stat().st_size,
        context,
        type_k,
        None if gpu is None else gpu.free_bytes,
        "the GPU" if gpu is None else gpu.name,
        flash_attn=flash_attn,
        type_v=type_v,
    )
    return placed, facts.n_layer


def memory_limit(environ: Mapping[str, str] = os.environ) -> int | None:
    """The device memory limit in bytes (LIMIT_ENV), or None. Raises ValueError with a sentence."""
    raw = environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return None
    try:
        mib = float(raw)
    except ValueError:
        raise ValueError(f"{LIMIT_ENV} must be a number of MiB (e.g. 4096), not '{raw}'") from None
    if not mib > 0:
        raise ValueError(f"{LIMIT_ENV} must be more than 0 MiB (it is {raw}); unset it for no limit")
    return int(mib * _MIB)


def within_limit(devices: list[Device], limit: int | None) -> list[Device]:
    """`devices` with no GPU's free memory above `limit` (what the placement plans with)."""
    if limit is None:
        return devices
    return [replace(d, free_bytes=min(d.free_bytes, limit)) if d.kind != "cpu" else d for d in devices]


def over_limit(allocated: int, limit: int | None, device: str) -> str:
    """An out-of-memory error's text when a load's buffers on `device` went past the limit, else ""."""
    if limit is None or allocated <= limit:
        return ""
    return (
        f"out of memory under the device memory limit: llama.cpp allocated {allocated / _MIB:.0f} MiB on "
        f"{device}, {LIMIT_ENV} is {limit / _MIB:.0f}"
    )


def checked_open(open_model: Callable[[int], Any], buffers: BufferReport, device: str | None, limit: int | None) -> Callable[[int], Any]:
    """open_model(layers) for open_with_retries, with what llama.cpp's log says: a failed load's
    error lines added to its exception (llama-cpp-python's says only "Failed to load model"; the
    log says the device ran out of memory), and a load whose buffers on `device` go past `limit`
    closed and failed as out of memory. `buffers` is the llama_buffer_report of the loads."""

    def attempt(n_gpu_layers: int) -> Any:
        seen, sized = len(buffers.errors), len(buffers.lines)
        try:
            model = open_model(n_gpu_layers)
            past = over_limit(BufferReport(buffers.lines[sized:]).device_bytes(device), limit, device) if device else ""
            if past and n_gpu_layers > 0:
                model.close()
                raise RuntimeError(past)
            return model
        except Exception as exc:
            del buffers.lines[sized:]  # a failed attempt's buffers were freed
            logged = "; ".join(buffers.errors[seen:])
            if not logged:
                raise
            raise RuntimeError(f"{exc} ({logged})") from None

    return attempt


def is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower().replace(" ", "")
    return any(word.replace(" ", "") in text for word in _OUT_OF_MEMORY)


def open_with_retries(open_model: Callable[[int], T], n_gpu_layers: int, n_layers: int) -> tuple[T, int, str]:
    """open_model(layers), and again with fewer layers while a load with some on the GPU runs
    out of device memory. Returns (the model, the layers it has on the GPU, a note when fewer
    than planned: "loaded 20 of 29 layers on the GPU: the rest did not fit")."""
    planned = ngl = n_gpu_layers
    while True:
        try:
            model = open_model(ngl)
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError with C-level text
            if ngl == 0 or not is_out_of_memory(exc):
                raise
            ngl = fewer_layers(ngl)
            continue
        if ngl < planned:
            return model, ngl, f"loaded {ngl} of {n_layers + 1} layers on the GPU: the rest did not fit"
        return model, ngl, ""


def report(
    devs: list[Device],
    gpu: Device | None,
    placed: Placement,
    n_layer: int,
    n_gpu_layers: int,
    kv_on_gpu: bool,
    retried: str,
    after: list[Device] | None = None,
    process_vram: Callable[[], int | None] | None = None,
    allocated: Callable[[str], int] | None = None,
) -> PlacementReport:
    """What a load did: `devs` and `gpu` as read before it, `after` the devices read after it
    (their free memory gives what the load took when the backend cannot say per process),
    `process_vram` this process's device memory where the driver tells (NVML), `allocated` what
    llama.cpp says it allocated on a device, for a device whose free memory does not move (Mesa's
    software driver reports its heap budget unchanged)."""
    layers = n_layer + 1
    ngl = min(max(n_gpu_layers, 0), layers) if gpu is not None else 0
    cpu = next((d for d in devs if d.kind == "cpu"), None)
    if not ngl or gpu is None:
        device = cpu.description if cpu is not None and cpu.description else "CPU"
        note = placed.reason if gpu is None or not retried else retried
        return PlacementReport("cpu", device, layers, 0, False, note, devices=[d.to_dict() for d in devs])
    used = process_vram() if process_vram is not None else None
    if used is None and after is not None:
        now = next((d for d in after if d.name == gpu.name), None)
        if now is not None and gpu.free_bytes > now.free_bytes:
            used = gpu.free_bytes - now.free_bytes
    if used is None and allocated is not None:
        used = allocated(gpu.name) or None
    note = retried or (placed.reason if placed.n_gpu_layers == ngl else f"{ngl} of {layers} layers on {gpu.name}")
    return PlacementReport(
        gpu.backend.lower() or "gpu",
        gpu.description or gpu.name,
        layers,
        ngl,
        kv_on_gpu,
        note,
        vram_estimate=placed.vram_bytes or None,
        vram_used=used,
        devices=[d.to_dict() for d in devs],
    )


def nvml_process_vram(pid: int) -> int | None:
    """Device memory the process `pid` holds on NVIDIA GPUs (nvidia-ml-py), or None where
    there is no NVIDIA driver or library."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            total = 0
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid == pid and proc.usedGpuMemory:
                        total += int(proc.usedGpuMemory)
            return total or None
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no device, no permission: the caller measures otherwise
        return None
