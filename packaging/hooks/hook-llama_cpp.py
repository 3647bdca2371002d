"""PyInstaller hook for llama-cpp-python: bundle the llama.cpp shared libraries it loads with
ctypes from `llama_cpp/lib` (llama_cpp/llama_cpp.py: Path(__file__).parent / "lib"), at the
same place in the frozen app, so `import llama_cpp` finds them there.

What lands in dist/Cove/_internal/llama_cpp/lib per platform:
  Linux    libllama.so, libggml.so, libggml-base.so, libggml-cpu.so, libmtmd.so (the names
           ctypes opens) and their sonames libX.so.0 (the names the libraries' NEEDED
           entries ask for, found through their RUNPATH $ORIGIN). The fully versioned copies
           (libX.so.0.25.3) are skipped: a wheel stores the symlink chain as three copies.
  Windows  llama.dll, ggml.dll, ggml-base.dll, ggml-cpu.dll, mtmd.dll (+ ggml-cuda.dll and
           the CUDA runtime for a CUDA build; llama_cpp adds the lib folder to the DLL path).
  macOS    libllama.dylib, libggml*.dylib, libmtmd.dylib; with Metal, also ggml-metal.metal /
           default.metallib when the wheel was not built with GGML_METAL_EMBED_LIBRARY
           (collected below as data next to the dylibs, where ggml looks for them).
A llama.cpp built with GGML_BACKEND_DL loads its backends (libggml-cpu-haswell.so, ...)
at run time from this folder; they match the patterns below and are collected too.

COVE_LLAMA_LIB_DIR (set by packaging/build.sh): take the libraries from there instead of the
venv's llama_cpp/lib: the portable build's (packaging/llama-wheel.sh), while the venv keeps the
developer's native one. Its Python side is the same version's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from PyInstaller.utils.hooks import collect_data_files, collect_dynamic_libs

_FULLY_VERSIONED = re.compile(r"\.so\.\d+\.\d+(\.\d+)*$")  # libllama.so.0.5.0, not libllama.so.0

_PATTERNS = ["*.dll", "*.dylib", "lib*.so", "lib*.so.*"]
_OTHER_LIBS = os.environ.get("COVE_LLAMA_LIB_DIR")
if _OTHER_LIBS:
    found = sorted({str(p) for pattern in _PATTERNS for p in Path(_OTHER_LIBS).glob(pattern) if p.is_file()})
    binaries = [(src, "llama_cpp/lib") for src in found if not _FULLY_VERSIONED.search(Path(src).name)]
    if not any("libllama" in Path(src).name or "llama.dll" in src for src, _dest in binaries):
        raise SystemExit(f"hook-llama_cpp: no llama.cpp libraries in COVE_LLAMA_LIB_DIR={_OTHER_LIBS}")
else:
    binaries = [
        (src, dest)
        for src, dest in collect_dynamic_libs("llama_cpp", search_patterns=_PATTERNS)
        if not _FULLY_VERSIONED.search(Path(src).name)
    ]
# Metal shader sources / compiled library (macOS builds without an embedded metallib).
datas = collect_data_files("llama_cpp", includes=["**/*.metal", "**/*.metallib"])
# The OpenAI-compatible server (llama_cpp.server) pulls in FastAPI and uvicorn; Cove never uses it.
excludedimports = ["llama_cpp.server"]
