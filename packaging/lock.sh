#!/usr/bin/env bash
# Writes the lock files the desktop build installs from (packaging/build.sh), so two builds a
# month apart contain the same code:
#
#   packaging/requirements.lock    every package the app bundles: pyproject.toml's dependencies
#                                  with the `package` (PyInstaller) and `starter` extras, at exact
#                                  versions with the sha256 of every file PyPI has for them, for
#                                  every platform (markers say which lines apply where);
#   packaging/llama-source.lock    the llama-cpp-python source release (its sha256) that
#                                  packaging/llama-wheel.sh builds for the chosen backend.
#
#   packaging/lock.sh              # after a change to pyproject.toml's dependencies: versions
#                                  # already locked stay where the new ranges allow
#   packaging/lock.sh --upgrade    # every package to the newest version pyproject.toml allows
#
# The developer install (README) keeps pyproject.toml's ranges; tests/test_lock_file.py fails
# when the lock no longer satisfies them. The resolver is uv (pinned below), run from a venv of
# its own under build/; the build itself installs with plain pip (--require-hashes).
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION="0.13.9"
PY="${COVE_PYTHON:-.venv/bin/python}"
TOOLS="build/lock-tools"
if [ ! -x "$TOOLS/bin/uv" ] || [ "$("$TOOLS/bin/uv" --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
    rm -rf "$TOOLS"
    "$PY" -m venv "$TOOLS"
    "$TOOLS/bin/pip" install --quiet "uv==$UV_VERSION"
fi
UV="$TOOLS/bin/uv"
upgrade=()
[ "${1:-}" = "--upgrade" ] && upgrade=(--upgrade)
common=(--generate-hashes --universal --python-version 3.11 --quiet --no-header "${upgrade[@]}")
# llama-cpp-python is built from source by llama-wheel.sh (with the chosen GPU backend), not
# installed from the lock: its own dependencies are locked here, its source in the second file.
"$UV" pip compile pyproject.toml --extra package --extra starter --no-emit-package llama-cpp-python \
    "${common[@]}" -o packaging/requirements.lock
version="$("$PY" - <<'EOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(re.match(r"llama-cpp-python==(\S+)", d).group(1) for d in deps if d.startswith("llama-cpp-python==")))
EOF
)"
echo "llama-cpp-python==$version" > build/llama-source.in
"$UV" pip compile build/llama-source.in --no-deps "${common[@]}" -o packaging/llama-source.lock
for lock in packaging/requirements.lock packaging/llama-source.lock; do
    { echo "# Written by packaging/lock.sh (uv $UV_VERSION); installed by packaging/build.sh. Do not edit by hand."
      grep -v "^# The following packages were excluded\|^# llama-cpp-python$" "$lock"; } > "$lock.tmp"
    mv "$lock.tmp" "$lock"
done
echo "lock: $(grep -c '^[A-Za-z]' packaging/requirements.lock) packages in packaging/requirements.lock, llama-cpp-python $version in packaging/llama-source.lock"
