"""The parts of bench/gpu_bundle.sh that are easier in Python: trim the pinned llama-cpp-python
sdist to what a CUDA build of the wheel and of llama.cpp's tools needs, and check the finished
bundle folder (every part present, the archive within its size limit).

    python bundle.py trim SDIST.tar.gz OUT_DIR      # writes OUT_DIR/<same name>.tar.gz, prints its size
    python bundle.py check BUNDLE_DIR [ARCHIVE]     # the bundle's contents; the archive's size

The trimmed sdist keeps llama-cpp-python's package and build files and, of the vendored
llama.cpp, its sources, ggml's CPU and CUDA backends, tools/, common/, vendor/ and gguf-py/.
It drops what neither build reads: the git history (.git, 38 MB; the builds then report
llama.cpp's commit as "unknown"), the vocabulary GGUFs in models/, docs, examples, tests,
benches, media, the web UI's sources (the tools build turns the UI off), the multimodal test
media, and the other GPU backends' sources (each is only read when its GGML_<BACKEND> is on).
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

LIMIT_BYTES = 64 * 2**20

# Relative to the sdist's root folder (llama_cpp_python-<version>/).
DROP = (
    ".git",
    ".github",
    "docker",
    "docs",
    "examples",
    "tests",
    "vendor/llama.cpp/.github",
    "vendor/llama.cpp/.devops",
    "vendor/llama.cpp/models",
    "vendor/llama.cpp/docs",
    "vendor/llama.cpp/benches",
    "vendor/llama.cpp/media",
    "vendor/llama.cpp/tests",
    "vendor/llama.cpp/examples",
    "vendor/llama.cpp/pocs",
    "vendor/llama.cpp/tools/ui/src",
    "vendor/llama.cpp/tools/ui/tests",
    "vendor/llama.cpp/tools/ui/static",
    "vendor/llama.cpp/tools/mtmd/tests",
)
# ggml backends whose sources go: all but the CPU and CUDA ones.
DROP_BACKENDS = (
    "opencl",
    "vulkan",
    "sycl",
    "hexagon",
    "metal",
    "et",
    "webgpu",
    "openvino",
    "cann",
    "virtgpu",
    "zdnn",
    "zendnn",
    "musa",
    "hip",
    "blas",
    "rpc",
)
# Media files beside mtmd's sources (test inputs only).
DROP_SUFFIXES = (".mp4", ".mp3", ".jpeg", ".jpg", ".png", ".wav")
# What the builds need; the trim fails if any is missing afterwards.
KEEP = (
    "CMakeLists.txt",
    "pyproject.toml",
    "PKG-INFO",
    "llama_cpp/__init__.py",
    "vendor/llama.cpp/CMakeLists.txt",
    "vendor/llama.cpp/src",
    "vendor/llama.cpp/include",
    "vendor/llama.cpp/common",
    "vendor/llama.cpp/vendor",
    "vendor/llama.cpp/cmake",
    "vendor/llama.cpp/ggml/src/ggml-cpu",
    "vendor/llama.cpp/ggml/src/ggml-cuda",
    "vendor/llama.cpp/tools/llama-bench",
    "vendor/llama.cpp/tools/server",
    "vendor/llama.cpp/tools/cli",
    "vendor/llama.cpp/tools/mtmd",
    "vendor/llama.cpp/tools/ui/CMakeLists.txt",
    "vendor/llama.cpp/gguf-py",
)
# The bundle's parts (bench/gpu_bundle.sh writes them), relative to its folder.
BUNDLE_PARTS = ("gpu_check.sh", "gpu_check/verdict.py", "gpu_check/random_model.py", "gpu_check/requirements.txt", "MANIFEST.txt")
BUNDLE_WHEELS = ("cove-", "numpy-", "gguf-", "psutil-", "nvidia_ml_py-", "scikit_build_core-", "cmake-", "ninja-")


class BundleError(Exception):
    """A step of making or checking the bundle failed; the message is one sentence."""


def trim_tree(root: Path) -> list[str]:
    """Remove what the builds do not need from the extracted sdist at `root`; return what was removed."""
    removed: list[str] = []
    targets = [*DROP, *(f"vendor/llama.cpp/ggml/src/ggml-{b}" for b in DROP_BACKENDS)]
    for rel in targets:
        path = root / rel
        if path.is_dir():
            shutil.rmtree(path)
            removed.append(rel)
        elif path.exists():
            path.unlink()
            removed.append(rel)
    mtmd = root / "vendor/llama.cpp/tools/mtmd"
    if mtmd.is_dir():
        for path in sorted(mtmd.iterdir()):
            if path.is_file() and path.suffix.lower() in DROP_SUFFIXES:
                path.unlink()
                removed.append(str(path.relative_to(root)))
    missing = [rel for rel in KEEP if not (root / rel).exists()]
    if missing:
        raise BundleError(f"the trimmed sources lack {', '.join(missing)}")
    return removed


def trim_sdist(sdist: Path, out_dir: Path) -> Path:
    """Write a trimmed copy of the sdist archive `sdist` into `out_dir` under the same name."""
    if not sdist.is_file():
        raise BundleError(f"{sdist} does not exist")
    with tempfile.TemporaryDirectory(prefix="cove-sdist-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            with tarfile.open(sdist) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise BundleError(f"{sdist.name} could not be extracted: {exc}") from exc
        roots = [p for p in tmp.iterdir() if p.is_dir()]
        if len(roots) != 1:
            raise BundleError(f"{sdist.name} does not hold one top-level folder")
        trim_tree(roots[0])
        out_dir.mkdir(parents=True, exist_ok=True)
        out = out_dir / sdist.name
        with tarfile.open(out, "w:gz", compresslevel=9) as tar:
            tar.add(roots[0], arcname=roots[0].name)
    return out


def check_bundle(folder: Path, archive: Path | None = None, limit: int = LIMIT_BYTES) -> list[str]:
    """Problems with the bundle at `folder` (and its archive): missing parts, a missing sdist or
    wheel, an archive over `limit` bytes. An empty list means it is complete."""
    problems = [f"{part} is missing" for part in BUNDLE_PARTS if not (folder / part).is_file()]
    sdists = sorted((folder / "sdist").glob("llama_cpp_python-*.tar.gz")) if (folder / "sdist").is_dir() else []
    if not sdists:
        problems.append("sdist/llama_cpp_python-<version>.tar.gz is missing")
    wheels = [p.name.lower() for p in (folder / "wheels").glob("*.whl")] if (folder / "wheels").is_dir() else []
    problems += [f"no {prefix}*.whl in wheels/" for prefix in BUNDLE_WHEELS if not any(w.startswith(prefix) for w in wheels)]
    if archive is not None:
        size = archive.stat().st_size if archive.is_file() else None
        if size is None:
            problems.append(f"{archive} does not exist")
        elif size > limit:
            problems.append(f"{archive.name} is {size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB limit")
    return problems


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 3 and argv[0] == "trim":
            out = trim_sdist(Path(argv[1]), Path(argv[2]))
            print(f"{out} {out.stat().st_size}")
            return 0
        if len(argv) in (2, 3) and argv[0] == "check":
            problems = check_bundle(Path(argv[1]), Path(argv[2]) if len(argv) == 3 else None)
            for problem in problems:
                print(f"gpu_bundle: {problem}", file=sys.stderr)
            return 1 if problems else 0
    except BundleError as exc:
        print(f"gpu_bundle: {exc}", file=sys.stderr)
        return 1
    print("usage: bundle.py trim SDIST.tar.gz OUT_DIR | bundle.py check BUNDLE_DIR [ARCHIVE]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
