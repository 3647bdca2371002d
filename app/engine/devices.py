"""The devices llama.cpp can put layers on, as plain records (no native code: the command line
and the window read them from the engine process), and which one a model's layers go to."""

from __future__ import annotations

from dataclasses import dataclass

# enum ggml_backend_dev_type (ggml-backend.h)
DEVICE_KINDS = ("cpu", "gpu", "igpu", "accel", "meta")


@dataclass(frozen=True)
class Device:
    """One device llama.cpp can put layers on."""

    name: str  # e.g. "CPU", "Vulkan0", "CUDA0"
    description: str  # e.g. the CPU's or the GPU's model name
    kind: str  # one of DEVICE_KINDS
    free_bytes: int
    total_bytes: int
    backend: str  # the backend that gives it: "CPU", "Vulkan", "CUDA", ...

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "free_bytes": self.free_bytes,
            "total_bytes": self.total_bytes,
            "backend": self.backend,
        }


def gpu_of(devices: list[Device]) -> Device | None:
    """The device layers go to: the first GPU (dedicated before integrated), or None."""
    for kind in ("gpu", "igpu"):
        for device in devices:
            if device.kind == kind:
                return device
    return None
