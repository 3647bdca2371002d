"""`nvidia-smi`'s figure for the device memory one process holds, for `cove bench` to set beside
the engine's own readout (the placement's `vram_used`, read through NVML inside the engine host).

`cove bench` asks nvidia-smi itself while the engine holds the model, so the two figures come
from the same moment of the same process; where nvidia-smi is not installed (no NVIDIA driver)
the readout is None and the bench carries on without it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

QUERY = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def parse_compute_apps(text: str, pid: int) -> int | None:
    """MiB that `pid` holds in `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`
    output (one "pid, MiB" row per process and GPU; a process on two GPUs has two rows, summed),
    or None when no row names `pid` or its figure is not a number ("[N/A]" where the driver withholds it)."""
    total = 0
    found = False
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 2 or cells[0] != str(pid):
            continue
        try:
            total += int(float(cells[1]))
        except ValueError:
            continue
        found = True
    return total if found else None


def nvidia_smi_process_mib(
    pid: int | None,
    run: Callable[..., Any] = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
) -> int | None:
    """Device memory (MiB) nvidia-smi reports for process `pid`, or None without nvidia-smi,
    without a pid, or when nvidia-smi fails or does not list the process."""
    if pid is None:
        return None
    exe = which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = run([exe, *QUERY], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return parse_compute_apps(done.stdout, pid)
