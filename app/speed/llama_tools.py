"""Build llama.cpp's own programs (llama-bench, llama-server, llama-cli, llama-mtmd-cli) from the
sources vendored in the pinned llama-cpp-python sdist, in one configure and one build, into Cove's
tools cache.

The build configures the sdist's own top-level CMakeLists.txt (the very project pip built the
wheel from) with scikit-build-core's defaults, so ggml gets the same flags as the engine:
Release, shared libraries, GGML_NATIVE=ON, OpenMP, no curl, plus `$CMAKE_ARGS` exactly as
llama-cpp-python's build honours it. The four tools share every library and flag, so they
are one build: `cove bench --compare-llama-bench`, the levers benchmark, the remote tests and
bench/vision.py all take their binaries from the one folder `llama-tools-<version>`.

The sources come from PyPI through pip, or, where `$COVE_LLAMA_SDIST` names a local
`llama_cpp_python-<version>.tar.gz`, from that file (a machine without network access:
bench/gpu_check.sh points it at the trimmed sdist its bundle carries).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.atomic_file import locked

DEFAULT_VERSION = "0.3.36"
BUILD_INFO = "build-info.json"


class LlamaToolError(RuntimeError):
    """A step of building or running a llama.cpp tool failed; the message is one readable sentence."""


@dataclass(frozen=True)
class ToolSpec:
    """One cached build: the folder `{name}-{version}` holding the binaries of `targets`."""

    name: str  # the folder's name
    targets: tuple[str, ...]  # cmake targets built and binaries collected
    options: tuple[str, ...]  # configure options beyond the engine's that expose the targets
    source_dirs: tuple[str, ...]  # folders under vendor/llama.cpp the sdist must contain


# The server's web UI is either built with npm or downloaded from a Hugging Face bucket at
# build time; Cove needs neither (it talks to the API), so both are off: no network during
# the build, and the server answers the API with an empty UI table. llama-cli links the
# server's own library, and llama-bench the common library they all share.
LLAMA_TOOLS = ToolSpec(
    "llama-tools",
    ("llama-bench", "llama-server", "llama-cli", "llama-mtmd-cli"),
    ("-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"),
    ("tools/llama-bench", "tools/server", "tools/cli", "tools/mtmd"),
)


def binary_name(target: str) -> str:
    return f"{target}.exe" if os.name == "nt" else target


def tool_dir(tools_dir: Path, spec: ToolSpec, version: str = DEFAULT_VERSION) -> Path:
    return Path(tools_dir) / f"{spec.name}-{version}"


def cmake_args(source_dir: Path, build_dir: Path, spec: ToolSpec, environ: dict[str, str] | None = None) -> list[str]:
    """The configure command: what scikit-build-core runs for `pip install llama-cpp-python`.

    scikit-build-core builds Release with Ninja when it is present and appends `$CMAKE_ARGS`;
    the sdist's CMakeLists.txt forces BUILD_SHARED_LIBS=ON, LLAMA_CURL=OFF and leaves
    GGML_NATIVE at ggml's default (ON). We only add what exposes the tool's targets (tools
    on, the llava/mtmd add-on off, which the tools tree would otherwise add twice, and the
    spec's options) and an $ORIGIN rpath so the binaries find the shared libraries copied
    beside them.
    """
    env = os.environ if environ is None else environ
    args = ["cmake", "-S", str(source_dir), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    args += [
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAVA_BUILD=OFF",
        *spec.options,
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DCMAKE_BUILD_RPATH=$ORIGIN",
    ]
    args += shlex.split(env.get("CMAKE_ARGS", ""))
    return args


def cpu_signature() -> str:
    """What a native build depends on: the processor's instruction-set flags (Linux's
    /proc/cpuinfo), else the machine's name. ggml builds with GGML_NATIVE for the CPU it is built
    on, so binaries built on another processor may stop with an illegal instruction here."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return "flags:" + " ".join(sorted(set(value.split())))
    except OSError:
        pass
    import platform

    return f"machine:{platform.machine()} {platform.processor()}"


def is_built(tools_dir: Path, spec: ToolSpec = LLAMA_TOOLS, version: str = DEFAULT_VERSION) -> bool:
    """The tools' folder holds every binary, built on a processor with this one's instruction set
    (a home folder carried to another machine keeps a build that may not run there)."""
    dest = tool_dir(tools_dir, spec, version)
    if not all((dest / binary_name(t)).is_file() for t in spec.targets):
        return False
    try:
        info = json.loads((dest / BUILD_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("cpu") == cpu_signature()


def tool_binary(tools_dir: Path, target: str, version: str = DEFAULT_VERSION, spec: ToolSpec = LLAMA_TOOLS) -> Path:
    """Where `target` (e.g. "llama-server") lies once the tools are built."""
    if target not in spec.targets:
        raise ValueError(f"{target} is not one of the built tools ({', '.join(spec.targets)})")
    return tool_dir(tools_dir, spec, version) / binary_name(target)


def ensure_tool(
    tools_dir: Path,
    target: str,
    version: str = DEFAULT_VERSION,
    log: Callable[[str], None] = print,
    spec: ToolSpec = LLAMA_TOOLS,
) -> Path:
    """Return the path of `target`'s binary for `version`, building all the tools the first time."""
    ensure_tools(tools_dir, version, log, spec)
    return tool_binary(tools_dir, target, version, spec)


def ensure_tools(tools_dir: Path, version: str = DEFAULT_VERSION, log: Callable[[str], None] = print, spec: ToolSpec = LLAMA_TOOLS) -> Path:
    """Return the folder holding every tool of `spec` for `version`, building them the first time.

    Two processes asking at once (a test run and a benchmark) build once: the second waits on a
    lock file beside the tools' folder and then finds the finished build.
    """
    dest = tool_dir(tools_dir, spec, version)
    if is_built(tools_dir, spec, version):
        return dest
    if shutil.which("cmake") is None:
        raise LlamaToolError(
            f"cmake is not installed, so llama.cpp's tools ({', '.join(spec.targets)}) cannot be built (install cmake and a C++ compiler)"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with locked(dest.parent / f".{spec.name}-{version}.lock"):
        if is_built(tools_dir, spec, version):
            return dest
        _build(dest, spec, version, log)
    log(f"llama.cpp's tools ready in {dest}")
    return dest


def _build(dest: Path, spec: ToolSpec, version: str, log: Callable[[str], None]) -> None:
    # Build under the (private) tools dir, not /tmp: the build tree's path stays in the
    # binaries' RUNPATH after $ORIGIN, and a shared /tmp would let others plant libraries there.
    with tempfile.TemporaryDirectory(prefix=f".build-{spec.name}-{version}-", dir=dest.parent) as tmp_name:
        tmp = Path(tmp_name)
        source = _download_sdist(version, tmp, spec, log)
        build = tmp / "build"
        build_log = dest.parent / f"{spec.name}-{version}.build.log"
        configure = cmake_args(source, build, spec)
        log(f"configuring llama.cpp from llama-cpp-python {version} (log: {build_log})")
        started = time.monotonic()
        with build_log.open("w", encoding="utf-8") as fh:
            _run_logged(configure, fh, "cmake could not configure the llama.cpp sources", build_log, log)
            jobs = str(os.cpu_count() or 1)
            log(f"building {', '.join(spec.targets)} with {jobs} jobs (about 10 minutes on 2 cores, once)")
            targets = [arg for t in spec.targets for arg in ("--target", t)]
            _run_logged(
                ["cmake", "--build", str(build), "--config", "Release", *targets, "-j", jobs],
                fh,
                f"the build of llama.cpp's tools ({', '.join(spec.targets)}) failed",
                build_log,
                log,
            )
        staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-{version}-", dir=dest.parent))
        try:
            collect_build(build, staging, spec)
            info = {
                "version": version,
                "targets": list(spec.targets),
                "cmake_configure": configure,
                "build_seconds": round(time.monotonic() - started, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "cpu": cpu_signature(),
            }
            (staging / BUILD_INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
            if dest.exists():  # a half-finished earlier attempt, or a build for another processor
                shutil.rmtree(dest)
            os.replace(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def local_sdist(version: str, environ: dict[str, str] | None = None) -> Path | None:
    """The archive `$COVE_LLAMA_SDIST` names, checked to be llama-cpp-python `version`'s sdist; None when unset."""
    env = os.environ if environ is None else environ
    value = env.get("COVE_LLAMA_SDIST", "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    expected = f"llama_cpp_python-{version}.tar.gz"
    if path.name != expected:
        raise LlamaToolError(f"COVE_LLAMA_SDIST must name {expected}, not {path.name}")
    if not path.is_file():
        raise LlamaToolError(f"COVE_LLAMA_SDIST names {path}, which does not exist")
    return path


def _download_sdist(version: str, tmp: Path, spec: ToolSpec, log: Callable[[str], None]) -> Path:
    archive = local_sdist(version)
    if archive is not None:
        log(f"using the llama-cpp-python {version} sources in {archive} (COVE_LLAMA_SDIST)")
        archives = [archive]
    else:
        log(f"downloading the llama-cpp-python {version} sources with pip")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"llama-cpp-python=={version}",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(tmp / "sdist"),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        archives = sorted((tmp / "sdist").glob("llama_cpp_python-*.tar.gz")) if (tmp / "sdist").is_dir() else []
        if not archives:
            # Metadata preparation can fail after the archive is saved; only a missing archive matters.
            tail = tail_of(done.stderr or done.stdout)
            raise LlamaToolError(f"pip could not download the llama-cpp-python {version} sources: {tail}")
    log("extracting the sources")
    try:
        with tarfile.open(archives[0]) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp / "src", filter="data")
            else:  # pragma: no cover - Python without PEP 706
                tar.extractall(tmp / "src")
    except (tarfile.TarError, OSError) as exc:
        raise LlamaToolError(f"the llama-cpp-python {version} sources in {archives[0]} could not be extracted: {exc}") from exc
    roots = [p for p in (tmp / "src").iterdir() if (p / "CMakeLists.txt").is_file()]
    missing = [d for d in spec.source_dirs if not roots or not (roots[0] / "vendor" / "llama.cpp" / d).is_dir()]
    if missing:
        raise LlamaToolError(f"the llama-cpp-python {version} sources do not contain llama.cpp's {', '.join(missing)}")
    return roots[0]


def _run_logged(cmd: list[str], fh: Any, what: str, build_log: Path, log: Callable[[str], None]) -> None:
    fh.write("$ " + shlex.join(cmd) + "\n")
    fh.flush()
    started = last_report = time.monotonic()
    lines: list[str] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as exc:
        raise LlamaToolError(f"{what}: {exc}") from exc
    assert proc.stdout is not None
    for line in proc.stdout:
        fh.write(line)
        lines.append(line)
        del lines[:-40]
        # Ninja prints "[12/180] Building ..." lines; report one every half minute.
        if line.startswith("[") and time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            log("  " + progress_line(line, last_report - started))
    rc = proc.wait()
    fh.flush()
    if rc != 0:
        raise LlamaToolError(f"{what} (exit {rc}; full log in {build_log}): {tail_of(''.join(lines))}")


def collect_build(build: Path, dest: Path, spec: ToolSpec) -> None:
    """Copy the spec's binaries and every shared library the build produced into `dest`."""
    for target in spec.targets:
        name = binary_name(target)
        binaries = [p for p in build.rglob(name) if p.is_file()]
        if not binaries:
            raise LlamaToolError(f"the build finished but produced no {target} binary")
        shutil.copy2(binaries[0], dest / name)
    for pattern in ("*.so", "*.so.*", "*.dylib", "*.dll"):
        for lib in build.rglob(pattern):
            target_path = dest / lib.name
            if target_path.exists() or target_path.is_symlink():
                continue
            if lib.is_symlink():
                os.symlink(os.readlink(lib), target_path)
            elif lib.is_file():
                shutil.copy2(lib, target_path)


def progress_line(line: str, elapsed_s: float) -> str:
    """ "[120/300] Building ..." as "120/300 steps (40%) after 4 min"; other lines as they are, cut short."""
    head = line.split("]", 1)[0].lstrip("[")
    done, _, total = head.partition("/")
    minutes = f"{elapsed_s / 60:.0f} min"
    if done.strip().isdigit() and total.strip().isdigit() and int(total) > 0:
        return f"{int(done)}/{int(total)} steps ({100 * int(done) // int(total)}%) after {minutes}"
    return f"{line.strip()[:80]} after {minutes}"


def library_env(binary: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a built binary runs with: the folder of its libraries first on LD_LIBRARY_PATH."""
    env = dict(os.environ if environ is None else environ)
    lib_dir = str(Path(binary).parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib_dir, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def tail_of(text: str, lines: int = 3) -> str:
    kept = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return " / ".join(kept[-lines:]) or "no output"
