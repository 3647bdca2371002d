#!/usr/bin/env bash
# Makes the one archive bench/gpu_check.sh needs on a GPU machine without network access
# (docs/decisions/gpu-check.md): run here, with PyPI reachable.
#
#   bench/gpu_bundle.sh [--python-version 3.12] [--out build/cove-gpu-check.tar]
#
# The archive (a plain tar; its parts are compressed already) unpacks to cove-gpu-check/:
#   gpu_check.sh, gpu_check/{verdict.py,random_model.py,requirements.txt}   the check itself
#   sdist/llama_cpp_python-<pinned>.tar.gz   the pinned sources, trimmed (bench/gpu_check/bundle.py)
#   wheels/   Cove's wheel (this working tree) and, for CPython <python-version> on manylinux
#             x86_64, every wheel of bench/gpu_check/requirements.txt and their dependencies
#   MANIFEST.txt   versions, the commit, the files
# It fails when the archive is over 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
PY="${COVE_PYTHON:-$REPO/.venv/bin/python}"
PYVER=3.12
OUT="$REPO/build/cove-gpu-check.tar"
while [ $# -gt 0 ]; do
    case "$1" in
        --python-version) PYVER="${2:?--python-version needs a version such as 3.12}"; shift 2 ;;
        --out) OUT="${2:?--out needs a file name}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "gpu_bundle: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$PYVER" =~ ^3\.[0-9]+$ ]]; then
    echo "gpu_bundle: --python-version must look like 3.12, not '$PYVER'" >&2
    exit 2
fi
if [ ! -x "$PY" ]; then
    echo "gpu_bundle: $PY not found; set up the venv first (README) or set COVE_PYTHON" >&2
    exit 1
fi
case "$OUT" in /*) ;; *) OUT="$REPO/$OUT" ;; esac
VERSION="$("$PY" - <<'EOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(re.match(r"llama-cpp-python==(\S+)", d).group(1) for d in deps if d.startswith("llama-cpp-python==")))
EOF
)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cove-gpu-bundle.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
STAGE="$WORK/cove-gpu-check"
mkdir -p "$STAGE/gpu_check" "$STAGE/sdist" "$STAGE/wheels" "$WORK/full" "$WORK/cove-src"

echo "gpu_bundle: downloading the llama-cpp-python $VERSION sources" >&2
# pip saves the archive before it prepares the metadata; only a missing archive is an error.
"$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$WORK/full" "llama-cpp-python==$VERSION" >/dev/null 2>&1 || true
SDIST="$WORK/full/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
    echo "gpu_bundle: pip could not download the llama-cpp-python $VERSION sources (is PyPI reachable?)" >&2
    exit 1
fi
LLAMA_COMMIT="$(tar -xzOf "$SDIST" "llama_cpp_python-$VERSION/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null | head -c 12 || true)"
echo "gpu_bundle: trimming them ($(du -m "$SDIST" | cut -f1) MiB as published)" >&2
"$PY" bench/gpu_check/bundle.py trim "$SDIST" "$STAGE/sdist" >/dev/null

echo "gpu_bundle: downloading the wheels for CPython $PYVER (manylinux x86_64)" >&2
"$PY" -m pip download --quiet --only-binary=:all: --implementation cp --python-version "$PYVER" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any \
    -d "$STAGE/wheels" -r bench/gpu_check/requirements.txt >&2

echo "gpu_bundle: building Cove's wheel from this working tree" >&2
for d in app models ui; do
    (cd "$REPO" && tar --exclude=__pycache__ -cf - "$d") | tar -xf - -C "$WORK/cove-src"
done
cp pyproject.toml README.md "$WORK/cove-src/"
"$PY" -m pip wheel --quiet --no-deps -w "$STAGE/wheels" "$WORK/cove-src" >&2

cp bench/gpu_check.sh "$STAGE/"
cp bench/gpu_check/verdict.py bench/gpu_check/random_model.py bench/gpu_check/requirements.txt "$STAGE/gpu_check/"
{
    echo "cove-gpu-check: made $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- app models ui 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "llama-cpp-python $VERSION (trimmed sdist), llama.cpp ${LLAMA_COMMIT:-unknown}"
    echo "wheels for CPython $PYVER, manylinux x86_64"
    echo
    (cd "$STAGE" && find . -type f ! -name MANIFEST.txt | sort | while read -r f; do echo "$(du -k "$f" | cut -f1) KiB  ${f#./}"; done)
} > "$STAGE/MANIFEST.txt"

mkdir -p "$(dirname "$OUT")"
tar -cf "$OUT" -C "$WORK" cove-gpu-check
"$PY" bench/gpu_check/bundle.py check "$STAGE" "$OUT"
echo "gpu_bundle: $OUT, $(( $(stat -c %s "$OUT") / 1024 )) KiB (limit 65536 KiB), for CPython $PYVER" >&2
echo "$OUT"
