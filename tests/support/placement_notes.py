"""The placement note's sentence about the GPU, for the offload tests (tests/e2e/test_vulkan_offload.py,
tests/e2e/test_frozen_gpu.py): on a processor with AMX the engine adds why llama.cpp's AMX weight path
is off (app/engine/host/cpu_quirks.py), which says nothing of the GPU."""

from __future__ import annotations

from typing import Any


def gpu_note(placement: dict[str, Any]) -> str:
    # Imported here: the offload tests load llama.cpp in processes of their own, from a library
    # path set before import, and this module must not pull the engine into pytest's process.
    from app.engine.host.cpu_quirks import AMX_NOTE

    return str(placement["note"]).removesuffix("; " + AMX_NOTE)
