"""What llama.cpp says about the buffers it allocates while a model loads: its log lines are
captured for the length of a `with` block and the KV cache and compute buffer sizes read from them,
and its error lines kept (llama-cpp-python's exception says only "Failed to load model"; the log
says why, e.g. that a device ran out of memory).

llama.cpp reports its allocations only in its log (there is no API for a context's buffer sizes),
e.g. `llama_kv_cache:        CPU KV buffer size =    24.00 MiB`, one line per buffer and device.
Host-internal: the log callback is process-wide, so this is used around a load only.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import llama_cpp

_MIB = 1024 * 1024
_GGML_LOG_LEVEL_ERROR = 4  # enum ggml_log_level
_KV = re.compile(r"KV buffer size\s*=\s*([0-9.]+)\s*MiB")
_COMPUTE = re.compile(r"compute buffer size\s*=\s*([0-9.]+)\s*MiB")
_ON_DEVICE = re.compile(r":\s*(\S+)\s+(?:\w+\s+)?buffer size\s*=\s*([0-9.]+)\s*MiB")


@dataclass
class BufferReport:
    """The buffers llama.cpp reported while the block ran (bytes, summed over devices)."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # llama.cpp's and ggml's error lines (why a load failed)

    @property
    def kv_bytes(self) -> int:
        return _total(_KV, self.lines)

    @property
    def compute_bytes(self) -> int:
        return _total(_COMPUTE, self.lines)

    def device_bytes(self, device: str) -> int:
        """What llama.cpp allocated on `device` (e.g. "Vulkan0"): its model, KV cache and compute
        buffers ("Vulkan_Host", pinned host memory, is not the device)."""
        return sum(round(float(m.group(2)) * _MIB) for line in self.lines for m in [_ON_DEVICE.search(line)] if m and m.group(1) == device)


def _total(pattern: re.Pattern[str], lines: list[str]) -> int:
    return sum(round(float(m.group(1)) * _MIB) for line in lines for m in [pattern.search(line)] if m)


@contextmanager
def llama_buffer_report() -> Iterator[BufferReport]:
    """Collect llama.cpp's log lines about buffer sizes; llama-cpp-python's own logger (quiet
    unless verbose) is put back afterwards."""
    report = BufferReport()

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def collect(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", "replace")
        if "buffer size" in line:
            report.lines.append(line.strip())
        if level == _GGML_LOG_LEVEL_ERROR and line.strip():
            report.errors.append(line.strip())

    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        yield report
    finally:
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
