"""The devices llama.cpp sees, asked of the engine process (ListDevices), and the fit verdict
that uses a GPU found that way when NVML finds none (a GPU of another maker)."""

from __future__ import annotations

import json

import pytest

from app.cli import models_fit_cmd
from app.engine import gpu_memory
from app.engine.client import EngineClient
from models.memory_records import MachineMemory

GiB = 1024**3


def test_the_engine_lists_this_machines_devices_with_their_memory() -> None:
    with EngineClient() as engine:
        found = engine.devices()
    cpu = [d for d in found if d["kind"] == "cpu"]
    assert len(cpu) == 1 and cpu[0]["name"] == "CPU" and cpu[0]["total_bytes"] > 0
    assert set(cpu[0]) == {"name", "description", "kind", "free_bytes", "total_bytes", "backend"}


class _GpuEngine:
    def __init__(self, *args: object) -> None:
        pass

    def __enter__(self) -> _GpuEngine:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def devices(self) -> list[dict]:
        return [
            {"name": "CPU", "description": "x", "kind": "cpu", "free_bytes": 8 * GiB, "total_bytes": 16 * GiB, "backend": "CPU"},
            {
                "name": "Vulkan0",
                "description": "AMD Radeon RX 7600",
                "kind": "gpu",
                "free_bytes": 7 * GiB,
                "total_bytes": 8 * GiB,
                "backend": "Vulkan",
            },
        ]


def test_fit_judges_against_a_gpu_the_engine_sees_when_nvml_sees_none(monkeypatch: pytest.MonkeyPatch, cove_core, capsys) -> None:
    monkeypatch.setattr(models_fit_cmd, "machine_memory", lambda: MachineMemory(16 * GiB, 8 * GiB, None, None))
    monkeypatch.setattr(gpu_memory, "EngineClient", _GpuEngine)
    model = cove_core.library.list()[0]
    parser = __import__("argparse").ArgumentParser()
    sub = parser.add_subparsers()
    models_fit_cmd.add_subcommands(sub)
    args = parser.parse_args(["fit", model.name, "--gpu-layers", "-1", "--json"])
    assert models_fit_cmd.run_fit(cove_core, args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["machine"]["vram_total"] == 8 * GiB and out["machine"]["vram_free"] == 7 * GiB
    assert out["estimate"]["verdict"] == "fits on GPU"
