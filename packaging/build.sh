#!/usr/bin/env bash
# Builds Cove as a one-folder app: dist/Cove/ (run dist/Cove/cove). Work files go to build/.
#
#   packaging/build.sh                  # from the repository, after the README's setup (.venv)
#   COVE_BUNDLE_STARTER=1 packaging/build.sh   # also bundle the starter model (+253 MB)
#   COVE_BACKEND=cpu packaging/build.sh         # llama.cpp's backend (packaging/llama-wheel.sh): vulkan
#                                               # (the default on Linux: every x86-64 CPU, and GPUs through
#                                               # Vulkan where a driver exists), cpu (no GPU backend), cuda,
#                                               # metal (the default on macOS), native (this CPU only)
#   packaging/build.sh --distpath D --workpath W   # extra arguments go to PyInstaller
#
# The build runs in a venv of its own, build/venv, installed from packaging/requirements.lock
# (exact versions, every file's sha256: packaging/lock.sh writes it) and llama.cpp's wheel for the
# chosen backend (packaging/llama-wheel.sh, from the source packaging/llama-source.lock names),
# so two builds a month apart contain the same code. It is made again when either changes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${COVE_PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
    echo "build: $PY not found; set up the venv first (README: python3.11 -m venv .venv && .venv/bin/pip install -e '.[starter,dev]')" >&2
    exit 1
fi
# llama.cpp for distribution, not the venv's native build: its wheel (built once and cached by
# llama-wheel.sh) unpacked into build/, and the PyInstaller hook takes its libraries from there.
wheel="$(packaging/llama-wheel.sh)"
if [ "${COVE_BACKEND:-}" != "native" ]; then
    libs="build/llama-$(basename "$(dirname "$wheel")")"
    if [ ! -e "$libs/.from" ] || [ "$(cat "$libs/.from")" != "$wheel" ]; then
        rm -rf "$libs" && mkdir -p "$libs"
        "$PY" -m zipfile -e "$wheel" "$libs/wheel"
        # The backends a GGML_BACKEND_DL build loads at run time (libggml-cpu-haswell.so, ...)
        # are in the wheel's bin/: next to libggml they go, where the engine loads them from.
        if [ -d "$libs/wheel/bin" ]; then cp "$libs/wheel/bin/"libggml-*.so "$libs/wheel/llama_cpp/lib/"; fi
        echo "$wheel" > "$libs/.from"
    fi
    export COVE_LLAMA_LIB_DIR="$PWD/$libs/wheel/llama_cpp/lib"
fi
BUILD_VENV="build/venv"
stamp="$(cat packaging/requirements.lock | sha256sum | cut -c1-16) $wheel"
if [ ! -x "$BUILD_VENV/bin/python" ] || [ "$(cat "$BUILD_VENV/.from" 2>/dev/null)" != "$stamp" ]; then
    echo "build: installing the locked packages into $BUILD_VENV (packaging/requirements.lock)" >&2
    rm -rf "$BUILD_VENV"
    "$PY" -m venv "$BUILD_VENV"
    # --require-hashes: a file whose sha256 is not in the lock is refused; every dependency must be there too.
    "$BUILD_VENV/bin/python" -m pip install --quiet --require-hashes -r packaging/requirements.lock >&2
    "$BUILD_VENV/bin/python" -m pip install --quiet --no-deps "$wheel" >&2
    echo "$stamp" > "$BUILD_VENV/.from"
fi
"$BUILD_VENV/bin/python" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller "$@" packaging/cove.spec

# Python built from source (pyenv) keeps its debug info in libpython and the stdlib's
# extension modules (about 25 MB here): drop the debug sections, keep every symbol.
DIST="dist"
prev=""
for arg in "$@"; do
    [ "$prev" = "--distpath" ] && DIST="$arg"
    case "$arg" in --distpath=*) DIST="${arg#--distpath=}" ;; esac
    prev="$arg"
done
if command -v strip >/dev/null && command -v readelf >/dev/null; then
    find "$DIST/Cove/_internal" -type f -name "*.so*" -print0 | while IFS= read -r -d '' lib; do
        # (not grep -q: it would close the pipe early, and readelf's SIGPIPE would read as 'no')
        if readelf -S "$lib" 2>/dev/null | grep '\.debug_info' >/dev/null; then strip --strip-debug "$lib"; fi
    done
fi
cp packaging/install-desktop.sh "$DIST/Cove/install-desktop.sh"  # adds the build to the applications menu
echo "build: $DIST/Cove/cove ($(du -sh "$DIST/Cove" | cut -f1))"
