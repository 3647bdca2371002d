#!/usr/bin/env bash
# Builds llama-cpp-python (the version pyproject.toml pins) for one llama.cpp backend, once:
# the wheel is kept in ~/.cache/cove/wheels/<backend>/ and reused by the next run.
#
#   packaging/llama-wheel.sh                      # prints the wheel's path (builds it if needed)
#   packaging/llama-wheel.sh --install            # and installs it into .venv, replacing llama_cpp
#   COVE_BACKEND=vulkan packaging/llama-wheel.sh --install
#
# COVE_BACKEND (default: vulkan on Linux, metal on macOS, else cpu):
#   cpu     no -march=native: the CPU kernels are built for every x86-64 level (SSE4.2 to
#           AVX-512) as backends loaded at run time, and llama.cpp picks the best one the CPU
#           runs (GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS).
#   vulkan  the CPU variants above plus the Vulkan backend (NVIDIA, AMD and Intel GPUs with their
#           ordinary drivers), as a library of its own that loads only where a Vulkan loader and a
#           driver exist: what packaging/build.sh ships on Linux. Needs the Vulkan loader, the shader
#           compiler and SPIR-V headers (Debian/Ubuntu: apt install libvulkan1 glslc spirv-headers) and
#           Vulkan headers of 1.3.275 or later, which packaging/vulkan-headers.sh fetches (Debian 12's
#           are too old for this llama.cpp).
#   cuda    the CPU variants plus CUDA (NVIDIA); needs the CUDA toolkit (nvcc) on PATH.
#   metal   Apple GPUs (macOS; Metal is built into the system).
#   native  this machine's CPU only (-march=native): what the README's setup builds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${COVE_PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
    echo "llama-wheel: $PY not found; set up the venv first (README)" >&2
    exit 1
fi
case "$(uname -s)" in
    Linux) default=vulkan ;;
    Darwin) default=metal ;;
    *) default=cpu ;;
esac
BACKEND="${COVE_BACKEND:-$default}"
PORTABLE="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"
case "$BACKEND" in
    cpu) ARGS="$PORTABLE" ;;
    vulkan) ARGS="$PORTABLE -DGGML_VULKAN=ON $(packaging/vulkan-headers.sh --cmake-args)" ;;
    cuda) ARGS="$PORTABLE -DGGML_CUDA=ON" ;;
    metal) ARGS="-DGGML_METAL=ON" ;;
    native) ARGS="" ;;
    *) echo "llama-wheel: COVE_BACKEND must be one of cpu, vulkan, cuda, metal, native (not '$BACKEND')" >&2; exit 2 ;;
esac
VERSION="$("$PY" - <<'EOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(re.match(r"llama-cpp-python==(\S+)", d).group(1) for d in deps if d.startswith("llama-cpp-python==")))
EOF
)"
CACHE="${COVE_WHEEL_CACHE:-$HOME/.cache/cove/wheels}/$BACKEND"
wheel="$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$wheel" ]; then
    mkdir -p "$CACHE"
    echo "llama-wheel: building llama-cpp-python $VERSION for '$BACKEND' (several minutes; once)" >&2
    # --no-cache-dir: pip's own cache holds the README's native build under the same name.
    # The source release packaging/llama-source.lock names, refused unless its sha256 matches.
    if ! grep -q "^llama-cpp-python==$VERSION " packaging/llama-source.lock; then
        echo "llama-wheel: packaging/llama-source.lock is not for llama-cpp-python $VERSION; run packaging/lock.sh" >&2
        exit 1
    fi
    CMAKE_ARGS="$ARGS" "$PY" -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
        --require-hashes -w "$CACHE" -r packaging/llama-source.lock >&2
    wheel="$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl | head -1)"
fi
if [ "${1:-}" = "--install" ]; then
    "$PY" -m pip install --quiet --force-reinstall --no-deps "$wheel" >&2
fi
echo "$wheel"
