"""The llama.cpp backends and devices of this engine process: loading the dynamically built
ones (a portable build ships one CPU library per instruction set, and GPU backends as
libraries of their own) and listing the devices they give (name, kind, free and total memory).

llama-cpp-python 0.3.36 binds neither ggml_backend_load_all_from_path nor the device API, so
these few functions are called through ctypes on the libggml it loaded.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from pathlib import Path

import llama_cpp

from app.engine.devices import DEVICE_KINDS, Device


class NoBackend(RuntimeError):
    """No llama.cpp backend can run on this machine (a CPU older than every variant built)."""


def library_dir() -> Path:
    """Where llama_cpp loaded libllama and the ggml libraries from (a portable build's backends
    lie next to them): its lib folder, or LLAMA_CPP_LIB_PATH, which llama_cpp honours too."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return Path(override) if override else Path(llama_cpp.__file__).resolve().parent / "lib"


def backend_dirs() -> list[Path]:
    """Where a build's run-time backends may lie: next to libggml (the frozen app, where
    packaging/build.sh puts them), or where pip installs a wheel's top-level bin/ folder (a
    portable or GPU wheel installed into a venv by packaging/llama-wheel.sh --install): beside
    the llama_cpp package in site-packages, or under the environment's prefix."""
    return [library_dir(), Path(llama_cpp.__file__).resolve().parent.parent / "bin", Path(sys.prefix) / "bin"]


_ggml: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _ggml
    if _ggml is None:
        # libllama's own handle: a symbol looked up through it comes from the libggml libllama
        # uses (a wheel or a frozen app holds libggml.so and libggml.so.0 as two copies of one
        # file, and opening the other copy would give a second, empty backend registry).
        lib = ctypes.CDLL(None, handle=llama_cpp.llama_cpp._lib._handle)
        lib.ggml_backend_reg_count.restype = ctypes.c_size_t
        lib.ggml_backend_reg_get.restype = ctypes.c_void_p
        lib.ggml_backend_reg_get.argtypes = [ctypes.c_size_t]
        lib.ggml_backend_reg_name.restype = ctypes.c_char_p
        lib.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
            getattr(lib, name).restype = ctypes.c_char_p
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_type.restype = ctypes.c_int
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.restype = None
        lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
        lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_load_all_from_path.restype = None
        lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        _ggml = lib
    return _ggml


def load_backends() -> list[str]:
    """Make sure llama.cpp has its backends, and return their names. A build with the backends
    built in (the developer install) has them already; a portable build loads them from its
    library folder: the best CPU variant this CPU runs, and any GPU backend that finds a device.
    Raises NoBackend when none can run here."""
    lib = _lib()
    if lib.ggml_backend_reg_count() == 0:
        for folder in backend_dirs():
            if any(folder.glob("libggml-*-*.so")) or any(folder.glob("libggml-*.dll")):
                lib.ggml_backend_load_all_from_path(str(folder).encode())
                break
    names = [
        (lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)) or b"").decode("utf-8", "replace")
        for i in range(lib.ggml_backend_reg_count())
    ]
    if not any(name.upper() == "CPU" for name in names):
        raise NoBackend(
            f"this computer's processor ({platform.machine()}) lacks the instructions every "
            "llama.cpp build in Cove needs, so Cove cannot run models on it"
        )
    return names


def devices() -> list[Device]:
    """The devices of the loaded backends (call load_backends() first), CPU included."""
    lib = _lib()
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        kind = lib.ggml_backend_dev_type(dev)
        reg = lib.ggml_backend_dev_backend_reg(dev)
        out.append(
            Device(
                name=(lib.ggml_backend_dev_name(dev) or b"").decode("utf-8", "replace"),
                description=(lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", "replace").strip(),
                kind=DEVICE_KINDS[kind] if 0 <= kind < len(DEVICE_KINDS) else "other",
                free_bytes=int(free.value),
                total_bytes=int(total.value),
                backend=(lib.ggml_backend_reg_name(reg) or b"").decode("utf-8", "replace") if reg else "",
            )
        )
    return out
