#!/usr/bin/env bash
# The GPU check (issue 32, item 5), run on an NVIDIA machine from the unpacked bundle that
# bench/gpu_bundle.sh makes (docs/decisions/gpu-check.md); needs no network.
#
#   ./gpu_check.sh [--python python3.12] [--wheel PATH] [--model PATH] [--reps 5] [--work DIR]
#
# Steps, each timed (the whole run's goal is 10 minutes on 16 cores):
#   1. tools: nvidia-smi talks to the driver, nvcc (the CUDA toolkit), a C/C++ compiler, the Python
#   2. a venv from the bundle's wheels (pip install --no-index), cmake and ninja included
#   3. the CUDA builds, side by side, for this GPU's architecture only (nvidia-smi's compute_cap):
#      the llama-cpp-python wheel from the bundle's sdist (skipped with --wheel PATH), and
#      llama.cpp's llama-bench from the same sources with the same CMAKE_ARGS (Cove's tools
#      build, app/speed/llama_tools.py, told where the sdist is by COVE_LLAMA_SDIST)
#   4. a model: --model PATH, else a random-weight 1B Llama at Q8_0 (gpu_check/random_model.py)
#   5. cove bench --compare-llama-bench --json with automatic placement: llama-bench runs with
#      the -ngl Cove placed, and cove bench reads nvidia-smi for the engine process itself
#   6. the goals, PASS or FAIL (gpu_check/verdict.py): tg and pp >= 0.95 x llama-bench, the
#      engine's VRAM readout within 10 % of nvidia-smi, the layers on the GPU, the time
#
# Other options:
#   --arch NN      CUDA architecture(s) to build for (e.g. 90 or "86;90") instead of nvidia-smi's
#   --jobs N       build jobs (default: every core)
#   --shape S      the random model's shape: 1b (default) or tiny
#   --print-arch   print the architecture nvidia-smi reports, as CMake takes it, and stop
#   --cpu          a dry run of the plumbing without a GPU: no CUDA, no tool checks for it;
#                  the goals are printed but not judged
#   --venv DIR     use an existing environment as it is (Cove and llama-cpp-python installed):
#                  no venv, no wheel build, no installs
# Exit status: 0 every goal met (or a --cpu dry run finished), 1 a goal missed or a step
# failed, 2 bad usage.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=""
WHEEL=""
MODEL=""
REPS=5
WORK="$HERE/work"
ARCH=""
JOBS="$(nproc 2>/dev/null || echo 4)"
SHAPE=""
CPU=0
PRINT_ARCH=0
VENV=""
BUDGET_S=600

die() { echo "gpu_check: $*" >&2; exit 1; }
usage() { echo "gpu_check: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] && [[ "$2" != --* ]] || usage "$1 needs a value (see --help)"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --python) need_value "$@"; PY="$2"; shift 2 ;;
        --wheel) need_value "$@"; WHEEL="$2"; shift 2 ;;
        --model) need_value "$@"; MODEL="$2"; shift 2 ;;
        --reps) need_value "$@"; REPS="$2"; shift 2 ;;
        --work) need_value "$@"; WORK="$2"; shift 2 ;;
        --arch) need_value "$@"; ARCH="$2"; shift 2 ;;
        --jobs) need_value "$@"; JOBS="$2"; shift 2 ;;
        --shape) need_value "$@"; SHAPE="$2"; shift 2 ;;
        --venv) need_value "$@"; VENV="$2"; shift 2 ;;
        --cpu) CPU=1; shift ;;
        --print-arch) PRINT_ARCH=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) usage "unknown option '$1' (see --help)" ;;
    esac
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || usage "--reps must be a whole number of at least 1, not '$REPS'"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || usage "--jobs must be a whole number of at least 1, not '$JOBS'"
[ -z "$ARCH" ] || [[ "$ARCH" =~ ^[0-9]+[a-z]?(\;[0-9]+[a-z]?)*$ ]] || usage "--arch must look like 90 or \"86;90\", not '$ARCH'"
[ -z "$SHAPE" ] || [ "$SHAPE" = 1b ] || [ "$SHAPE" = tiny ] || usage "--shape must be 1b or tiny, not '$SHAPE'"
[ -z "$WHEEL" ] || [ -z "$VENV" ] || usage "--wheel and --venv do not go together (--venv installs nothing)"

# The architectures of this machine's GPUs as CMake takes them ("9.0" -> "90"; several: "86;90").
gpu_arch() {
    command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi is not on PATH, so there is no NVIDIA driver to check against (install the driver, or pass --cpu for a dry run)"
    local caps
    caps="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null)" \
        || die "nvidia-smi does not report the GPUs' compute capability (a driver older than 510?); pass --arch, e.g. --arch 90"
    local archs
    archs="$(printf '%s\n' "$caps" | tr -d ' \r' | { grep -E '^[0-9]+\.[0-9]+$' || true; } | tr -d . | sort -un | paste -sd';' -)"
    [ -n "$archs" ] || die "nvidia-smi reported no compute capability ('$(printf '%s' "$caps" | head -1)'); pass --arch, e.g. --arch 90"
    echo "$archs"
}

if [ "$PRINT_ARCH" = 1 ]; then
    gpu_arch
    exit 0
fi

T0=$SECONDS
STEP_NAME=""
STEP_T0=$SECONDS
step() {
    [ -z "$STEP_NAME" ] || echo "gpu_check: [$STEP_NAME] took $((SECONDS - STEP_T0)) s" >&2
    STEP_NAME="$1"
    STEP_T0=$SECONDS
    [ -z "$1" ] || echo "gpu_check: [$1] ..." >&2
}

mkdir -p "$WORK" || die "the work folder $WORK cannot be made"
WORK="$(cd "$WORK" && pwd)"
SDIST="$(ls "$HERE"/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | head -1 || true)"
# Cove's folders (the tools cache among them) for this check only, unless the caller set one.
export COVE_HOME="${COVE_HOME:-$WORK/home}"
[ -z "$SDIST" ] || export COVE_LLAMA_SDIST="$SDIST"

step "1 tools"
if [ "$CPU" = 1 ]; then
    CMAKE_ARGS_GPU=""
    [ -n "$SHAPE" ] || SHAPE=tiny
else
    command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi is not on PATH (install the NVIDIA driver), or pass --cpu for a dry run"
    nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi cannot talk to the driver: $(nvidia-smi -L 2>&1 | head -1)"
    if ! command -v nvcc >/dev/null 2>&1; then
        for d in "${CUDA_HOME:-}" /usr/local/cuda; do
            if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; break; fi
        done
    fi
    command -v nvcc >/dev/null 2>&1 || die "nvcc is not on PATH nor in \$CUDA_HOME/bin or /usr/local/cuda/bin (install the CUDA toolkit)"
    [ -n "$ARCH" ] || ARCH="$(gpu_arch)"
    CMAKE_ARGS_GPU="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH"
    [ -n "$SHAPE" ] || SHAPE=1b
    echo "gpu_check: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1); CUDA architecture $ARCH; $(nvcc --version | tail -1)" >&2
fi
if [ -z "$VENV" ]; then
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler (cc or gcc) on PATH (Debian/Ubuntu: apt install build-essential)"
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "no C++ compiler (c++ or g++) on PATH (Debian/Ubuntu: apt install build-essential)"
    [ -d "$HERE/wheels" ] || die "$HERE/wheels is missing: run this script from the unpacked bundle (bench/gpu_bundle.sh makes it)"
    [ -n "$SDIST" ] || [ -n "$WHEEL" ] || die "$HERE/sdist/ holds no llama_cpp_python-*.tar.gz: run this script from the unpacked bundle"
    WANT_PY="$(sed -n 's/^wheels for CPython \([0-9.]*\),.*/\1/p' "$HERE/MANIFEST.txt" 2>/dev/null | head -1)"
    [ -n "$PY" ] || PY="python${WANT_PY:-3.12}"
    command -v "$PY" >/dev/null 2>&1 || die "$PY is not on PATH; pass --python with a CPython ${WANT_PY:-3.12}"
    HAVE_PY="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    [ -z "$WANT_PY" ] || [ "$HAVE_PY" = "$WANT_PY" ] || die "$PY is Python $HAVE_PY but the bundle's wheels are for $WANT_PY (make a bundle with bench/gpu_bundle.sh --python-version $HAVE_PY)"
fi
if [ -n "$WHEEL" ]; then
    [ -f "$WHEEL" ] || die "--wheel $WHEEL does not exist"
    WHEEL="$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")"
fi
if [ -n "$MODEL" ]; then
    [ -f "$MODEL" ] || die "--model $MODEL does not exist"
    MODEL="$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")"
fi

step "2 venv"
if [ -n "$VENV" ]; then
    [ -x "$VENV/bin/python" ] || die "--venv $VENV has no bin/python"
    VENV="$(cd "$VENV" && pwd)"
else
    VENV="$WORK/venv"
    if [ ! -x "$VENV/bin/cove" ]; then
        rm -rf "$VENV"
        "$PY" -m venv "$VENV" >"$WORK/venv.log" 2>&1 \
            || die "$PY cannot make a virtual environment (Debian/Ubuntu: apt install python$HAVE_PY-venv): $(tail -1 "$WORK/venv.log")"
        "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$HERE/wheels" \
            -r "$HERE/gpu_check/requirements.txt" >>"$WORK/venv.log" 2>&1 \
            || die "the bundle's wheels did not install (log: $WORK/venv.log): $(tail -1 "$WORK/venv.log")"
        "$VENV/bin/python" -m pip install --quiet --no-index --no-deps "$HERE"/wheels/cove-*.whl >>"$WORK/venv.log" 2>&1 \
            || die "Cove's wheel did not install (log: $WORK/venv.log): $(tail -1 "$WORK/venv.log")"
    fi
fi
# cmake and ninja from the venv when the system has none.
export PATH="$PATH:$VENV/bin"
command -v cmake >/dev/null 2>&1 || die "cmake is neither on PATH nor in $VENV/bin"

step "3 builds"
export CMAKE_ARGS="$CMAKE_ARGS_GPU"
export CMAKE_BUILD_PARALLEL_LEVEL="$JOBS"
WHEEL_PID=""
if [ -z "$WHEEL" ] && [ "$VENV" = "$WORK/venv" ]; then
    BUILT="$(ls "$WORK"/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)"
    if [ -n "$BUILT" ] && [ "$(cat "$WORK/wheel/cmake-args" 2>/dev/null)" = "$CMAKE_ARGS" ]; then
        WHEEL="$BUILT"
    else
        rm -rf "$WORK/wheel"
        mkdir -p "$WORK/wheel"
        echo "gpu_check: building the llama-cpp-python wheel (CMAKE_ARGS=$CMAKE_ARGS; log: $WORK/wheel-build.log)" >&2
        ( S=$SECONDS
          rc=0
          "$VENV/bin/python" -m pip wheel --no-index --find-links "$HERE/wheels" --no-deps -w "$WORK/wheel" "$SDIST" \
              >"$WORK/wheel-build.log" 2>&1 || rc=$?
          echo "gpu_check: the wheel build took $((SECONDS - S)) s (exit $rc)" >&2
          exit $rc ) &
        WHEEL_PID=$!
    fi
fi
echo "gpu_check: building llama-bench (CMAKE_ARGS=$CMAKE_ARGS; log: $COVE_HOME/cache/tools/llama-tools-*.build.log)" >&2
TOOLS_RC=0
"$VENV/bin/python" - <<'EOF' || TOOLS_RC=$?
import json, os, shlex, shutil, sys, time
from app.paths import resolve_paths
from app.speed.llama_tools import BUILD_INFO, LLAMA_TOOLS, LlamaToolError, ensure_tools, tool_dir
started = time.monotonic()
tools = resolve_paths().tools_dir
# The tools' cache is keyed by version only: a build made with other CMAKE_ARGS (another
# architecture) is removed so that llama-bench is built the way the wheel is.
want = shlex.split(os.environ.get("CMAKE_ARGS", ""))
info = tool_dir(tools, LLAMA_TOOLS) / BUILD_INFO
if want and info.is_file():
    configure = json.loads(info.read_text(encoding="utf-8")).get("cmake_configure", [])
    if configure[-len(want):] != want:
        print("gpu_check: the cached llama-bench was built with other CMAKE_ARGS; building it anew", file=sys.stderr)
        shutil.rmtree(info.parent)
try:
    ensure_tools(tools, log=lambda m: print(f"gpu_check: {m}", file=sys.stderr, flush=True))
except LlamaToolError as exc:
    print(f"gpu_check: {exc}", file=sys.stderr)
    sys.exit(1)
print(f"gpu_check: the llama-bench build took {time.monotonic() - started:.0f} s (0 when built before)", file=sys.stderr)
EOF
if [ -n "$WHEEL_PID" ]; then
    wait "$WHEEL_PID" || die "the llama-cpp-python wheel build failed (log: $WORK/wheel-build.log): $(grep -iE 'error' "$WORK/wheel-build.log" | tail -1)"
    WHEEL="$(ls "$WORK"/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)"
    [ -n "$WHEEL" ] || die "the wheel build finished without a wheel (log: $WORK/wheel-build.log)"
    printf '%s' "$CMAKE_ARGS" >"$WORK/wheel/cmake-args"
fi
[ "$TOOLS_RC" = 0 ] || die "llama-bench could not be built (see above)"
if [ -n "$WHEEL" ]; then
    "$VENV/bin/python" -m pip install --quiet --no-index --no-deps --force-reinstall "$WHEEL" >>"$WORK/venv.log" 2>&1 \
        || die "the llama-cpp-python wheel $WHEEL did not install (log: $WORK/venv.log)"
fi
"$VENV/bin/python" -c "import llama_cpp" 2>/dev/null || die "llama_cpp does not import in $VENV (no wheel installed?)"

step "4 model"
if [ -z "$MODEL" ]; then
    MODEL="$WORK/random-llama-$SHAPE-q8_0.gguf"
    [ -f "$MODEL" ] || "$VENV/bin/python" "$HERE/gpu_check/random_model.py" "$MODEL" --shape "$SHAPE" >/dev/null \
        || die "the random model could not be written to $MODEL"
fi
echo "gpu_check: model $MODEL ($(( $(stat -c %s "$MODEL") / 1048576 )) MiB)" >&2

step "5 bench"
"$VENV/bin/cove" bench --model "$MODEL" --reps "$REPS" --compare-llama-bench --json >"$WORK/bench.json" \
    || die "cove bench failed (its message is above)"
echo "gpu_check: the report is in $WORK/bench.json" >&2

step ""
TOTAL=$((SECONDS - T0))
echo
echo "GPU check: $(basename "$MODEL"), $REPS repetitions, CMAKE_ARGS=${CMAKE_ARGS:-none}"
VERDICT_RC=0
"$VENV/bin/python" "$HERE/gpu_check/verdict.py" "$WORK/bench.json" || VERDICT_RC=$?
if [ "$TOTAL" -le "$BUDGET_S" ]; then
    echo "PASS  time  $TOTAL s (goal <= $BUDGET_S s)"
else
    echo "FAIL  time  $TOTAL s (goal <= $BUDGET_S s)"
    VERDICT_RC=1
fi
[ "$VERDICT_RC" -le 1 ] || exit 1
if [ "$CPU" = 1 ]; then
    echo "(--cpu dry run: the goals above are printed, not judged)"
    exit 0
fi
exit "$VERDICT_RC"
