"""Build llama.cpp's `llama-bench` from the sources vendored in the pinned llama-cpp-python
sdist, once, into Cove's tools cache, and run it and parse its JSON output.

The build configures the sdist's own top-level CMakeLists.txt (the very project pip built
the wheel from) with scikit-build-core's defaults, so ggml gets the same flags as the
engine: Release, shared libraries, GGML_NATIVE=ON, OpenMP, no curl, plus `$CMAKE_ARGS`
exactly as llama-cpp-python's build honours it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DEFAULT_VERSION = "0.3.36"
BINARY_NAME = "llama-bench.exe" if os.name == "nt" else "llama-bench"
_BUILD_INFO = "build-info.json"


class LlamaBenchError(RuntimeError):
    """A step of building or running llama-bench failed; the message is one readable sentence."""


def tool_dir(tools_dir: Path, version: str = DEFAULT_VERSION) -> Path:
    return Path(tools_dir) / f"llama-bench-{version}"


def cmake_args(source_dir: Path, build_dir: Path, environ: dict[str, str] | None = None) -> list[str]:
    """The configure command: what scikit-build-core runs for `pip install llama-cpp-python`.

    scikit-build-core builds Release with Ninja when it is present and appends `$CMAKE_ARGS`;
    the sdist's CMakeLists.txt forces BUILD_SHARED_LIBS=ON, LLAMA_CURL=OFF and leaves
    GGML_NATIVE at ggml's default (ON). We only add what exposes the llama-bench target
    (tools on, the llava/mtmd add-on off, which the tools tree would otherwise add twice)
    and an $ORIGIN rpath so the binary finds the shared libraries copied beside it.
    """
    env = os.environ if environ is None else environ
    args = ["cmake", "-S", str(source_dir), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    args += [
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAVA_BUILD=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DCMAKE_BUILD_RPATH=$ORIGIN",
    ]
    args += shlex.split(env.get("CMAKE_ARGS", ""))
    return args


def ensure_llama_bench(
    tools_dir: Path, version: str = DEFAULT_VERSION, log: Callable[[str], None] = print
) -> Path:
    """Return the path of a built llama-bench for `version`, building it the first time."""
    dest = tool_dir(tools_dir, version)
    binary = dest / BINARY_NAME
    if binary.is_file() and (dest / _BUILD_INFO).is_file():
        return binary
    if shutil.which("cmake") is None:
        raise LlamaBenchError("cmake is not installed, so llama-bench cannot be built (install cmake and a C++ compiler)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Build under the (private) tools dir, not /tmp: the build tree's path stays in the
    # binary's RUNPATH after $ORIGIN, and a shared /tmp would let others plant libraries there.
    with tempfile.TemporaryDirectory(prefix=f".build-{version}-", dir=dest.parent) as tmp_name:
        tmp = Path(tmp_name)
        source = _download_sdist(version, tmp, log)
        build = tmp / "build"
        build_log = dest.parent / f"llama-bench-{version}.build.log"
        configure = cmake_args(source, build)
        log(f"configuring llama.cpp from llama-cpp-python {version} (log: {build_log})")
        with build_log.open("w", encoding="utf-8") as fh:
            _run_logged(configure, fh, "cmake could not configure the llama.cpp sources", build_log, log)
            jobs = str(os.cpu_count() or 1)
            log(f"building llama-bench with {jobs} jobs; this takes a few minutes")
            _run_logged(
                ["cmake", "--build", str(build), "--config", "Release", "--target", "llama-bench", "-j", jobs],
                fh,
                "the llama-bench build failed",
                build_log,
                log,
            )
        staging = Path(tempfile.mkdtemp(prefix=f".llama-bench-{version}-", dir=dest.parent))
        try:
            _collect(build, staging)
            info = {
                "version": version,
                "cmake_configure": configure,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            (staging / _BUILD_INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
            if dest.exists():  # a half-finished earlier attempt without build-info.json
                shutil.rmtree(dest)
            os.replace(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    log(f"llama-bench ready: {binary}")
    return binary


def _download_sdist(version: str, tmp: Path, log: Callable[[str], None]) -> Path:
    log(f"downloading the llama-cpp-python {version} sources with pip")
    cmd = [
        sys.executable, "-m", "pip", "download", f"llama-cpp-python=={version}",
        "--no-deps", "--no-binary", ":all:", "-d", str(tmp / "sdist"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    archives = sorted((tmp / "sdist").glob("llama_cpp_python-*.tar.gz")) if (tmp / "sdist").is_dir() else []
    if not archives:
        # Metadata preparation can fail after the archive is saved; only a missing archive matters.
        tail = _tail(done.stderr or done.stdout)
        raise LlamaBenchError(f"pip could not download the llama-cpp-python {version} sources: {tail}")
    log("extracting the sources")
    with tarfile.open(archives[0]) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp / "src", filter="data")
        else:  # pragma: no cover - Python without PEP 706
            tar.extractall(tmp / "src")
    roots = [p for p in (tmp / "src").iterdir() if (p / "CMakeLists.txt").is_file()]
    if not roots or not (roots[0] / "vendor" / "llama.cpp" / "tools" / "llama-bench").is_dir():
        raise LlamaBenchError(f"the llama-cpp-python {version} sources do not contain llama.cpp's llama-bench")
    return roots[0]


def _run_logged(cmd: list[str], fh: Any, what: str, build_log: Path, log: Callable[[str], None]) -> None:
    fh.write("$ " + shlex.join(cmd) + "\n")
    fh.flush()
    last_report = time.monotonic()
    lines: list[str] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as exc:
        raise LlamaBenchError(f"{what}: {exc}") from exc
    assert proc.stdout is not None
    for line in proc.stdout:
        fh.write(line)
        lines.append(line)
        del lines[:-40]
        # Ninja prints "[12/180] Building ..." lines; report one every half minute.
        if line.startswith("[") and time.monotonic() - last_report > 30:
            log("  " + line.split("]", 1)[0] + "]")
            last_report = time.monotonic()
    rc = proc.wait()
    fh.flush()
    if rc != 0:
        raise LlamaBenchError(f"{what} (exit {rc}; full log in {build_log}): {_tail(''.join(lines))}")


def _collect(build: Path, dest: Path) -> None:
    """Copy the llama-bench binary and every shared library the build produced into `dest`."""
    binaries = [p for p in build.rglob(BINARY_NAME) if p.is_file()]
    if not binaries:
        raise LlamaBenchError("the build finished but produced no llama-bench binary")
    shutil.copy2(binaries[0], dest / BINARY_NAME)
    for pattern in ("*.so", "*.so.*", "*.dylib", "*.dll"):
        for lib in build.rglob(pattern):
            target = dest / lib.name
            if target.exists() or target.is_symlink():
                continue
            if lib.is_symlink():
                os.symlink(os.readlink(lib), target)
            elif lib.is_file():
                shutil.copy2(lib, target)


def llama_bench_command(
    binary: Path,
    model_path: Path | str,
    threads: int,
    reps: int,
    n_prompt: int = 512,
    n_gen: int = 128,
    extra_args: Sequence[str] = (),
) -> list[str]:
    return [
        str(binary), "-m", str(model_path), "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
        "-r", str(reps), "-o", "json", *extra_args,
    ]


def run_llama_bench(
    binary: Path,
    model_path: Path | str,
    threads: int,
    reps: int,
    n_prompt: int = 512,
    n_gen: int = 128,
    extra_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run llama-bench's pp and tg tests and return median tokens/s and the raw samples."""
    cmd = llama_bench_command(binary, model_path, threads, reps, n_prompt, n_gen, extra_args)
    env = dict(os.environ)
    lib_dir = str(Path(binary).parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib_dir, env.get("LD_LIBRARY_PATH", "")) if p)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, errors="replace")
    except OSError as exc:
        raise LlamaBenchError(f"llama-bench could not be started ({binary}): {exc}") from exc
    if done.returncode != 0:
        raise LlamaBenchError(f"llama-bench failed (exit {done.returncode}): {_tail(done.stderr or done.stdout)}")
    result = parse_llama_bench_json(done.stdout)
    result["command"] = cmd
    return result


def parse_llama_bench_json(text: str) -> dict[str, Any]:
    """Pick the pp and tg entries out of `llama-bench -o json` output; medians of `samples_ts`."""
    start = text.find("[")
    try:
        entries = json.loads(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise LlamaBenchError(f"llama-bench printed output that is not JSON ({exc})") from exc
    if not isinstance(entries, list) or not entries:
        raise LlamaBenchError("llama-bench printed no test results")
    pp = next((e for e in entries if e.get("n_prompt", 0) > 0 and e.get("n_gen", 0) == 0), None)
    tg = next((e for e in entries if e.get("n_gen", 0) > 0 and e.get("n_prompt", 0) == 0), None)
    if pp is None and tg is None:
        raise LlamaBenchError("llama-bench printed neither a prompt (pp) nor a generation (tg) result")
    first = entries[0]
    out: dict[str, Any] = {
        "pp_tps": _median_ts(pp),
        "tg_tps": _median_ts(tg),
        "pp_avg_ts": pp.get("avg_ts") if pp else None,
        "tg_avg_ts": tg.get("avg_ts") if tg else None,
        "pp_samples_ts": list(pp.get("samples_ts", [])) if pp else [],
        "tg_samples_ts": list(tg.get("samples_ts", [])) if tg else [],
        "n_prompt": pp.get("n_prompt") if pp else 0,
        "n_gen": tg.get("n_gen") if tg else 0,
    }
    for key in (
        "build_commit", "build_number", "cpu_info", "backends", "model_type", "n_threads", "n_batch",
        "n_ubatch", "type_k", "type_v", "flash_attn", "n_gpu_layers", "load_mode", "poll",
    ):
        if key in first:
            out[key] = first[key]
    return out


def merge_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several run_llama_bench results (e.g. one repetition each) as one: samples pooled, medians anew."""
    if not runs:
        raise LlamaBenchError("llama-bench was not run")
    merged = dict(runs[0])
    for key in ("pp", "tg"):
        samples = [float(x) for r in runs for x in r.get(f"{key}_samples_ts", [])]
        merged[f"{key}_samples_ts"] = samples
        merged[f"{key}_tps"] = float(statistics.median(samples)) if samples else None
        merged[f"{key}_avg_ts"] = sum(samples) / len(samples) if samples else None
    merged["runs"] = len(runs)
    return merged


def _median_ts(entry: dict[str, Any] | None) -> float | None:
    if entry is None:
        return None
    samples = entry.get("samples_ts") or []
    if samples:
        return float(statistics.median(samples))
    avg = entry.get("avg_ts")
    return float(avg) if avg is not None else None


def _tail(text: str, lines: int = 3) -> str:
    kept = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return " / ".join(kept[-lines:]) or "no output"
