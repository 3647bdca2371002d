"""The frozen app's GPU backend: packaging/build.sh ships llama.cpp's Vulkan backend once, beside
the CPU variants, and the app runs everywhere: on a machine without the Vulkan loader, with a
broken Vulkan driver, or with only a software device it answers on the CPU and the placement
note says why in one sentence; told to use the software device (lavapipe), it offloads every layer.

Marked `packaging` (the frozen build); .ci/run installs the Vulkan loader and Mesa's driver first.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import test_packaging
from tests.support.placement_notes import gpu_note
from tests.support.tiny_model import N_LAYER, write_tiny_gguf

no_python_env = test_packaging.no_python_env  # the fixture: PATH holds only decoy python commands

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(1800)]


def chat(frozen: Path, env: dict[str, str], model: Path, prefix: list[str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [*(prefix or []), str(frozen / "cove"), "chat", "--model", str(model), "--max-tokens", "4", "--seed", "1", "--json", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reply: dict[str, Any] = json.loads(result.stdout)
    assert reply["status"] in ("complete", "length") and reply["metrics"]["gen_tokens"] >= 1
    return reply


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_the_vulkan_backend_is_shipped_once_beside_the_cpu_variants(frozen: Path) -> None:
    libs = [p for p in (frozen / "_internal").rglob("libggml-*.so*") if p.is_file()]
    vulkan = [p for p in libs if p.name.startswith("libggml-vulkan")]
    assert len(vulkan) == 1, vulkan
    variants = {p.name for p in libs if p.name.startswith("libggml-cpu-")}
    assert {"libggml-cpu-x64.so", "libggml-cpu-haswell.so", "libggml-cpu-icelake.so"} <= variants, variants
    assert vulkan[0].parent == frozen / "_internal" / "llama_cpp" / "lib"


def test_only_a_software_vulkan_device_runs_on_the_cpu_and_says_so(frozen: Path, no_python_env: dict[str, str], tiny: Path) -> None:
    placement = chat(frozen, no_python_env, tiny)["metrics"]["placement"]
    assert placement["backend"] == "cpu" and placement["n_gpu_layers"] == 0
    assert placement["note"].startswith("no GPU: Vulkan offers only llvmpipe"), placement


def test_told_to_use_the_software_device_it_offloads_every_layer(frozen: Path, no_python_env: dict[str, str], tiny: Path) -> None:
    placement = chat(frozen, {**no_python_env, "GGML_VK_VISIBLE_DEVICES": "0"}, tiny)["metrics"]["placement"]
    assert placement["backend"] == "vulkan" and "llvmpipe" in placement["device"], placement
    assert placement["n_gpu_layers"] == placement["n_layers"] == N_LAYER + 1, placement
    assert gpu_note(placement) == f"all {N_LAYER + 1} layers fit on Vulkan0"


def test_a_broken_vulkan_driver_runs_on_the_cpu_and_says_so(
    frozen: Path, no_python_env: dict[str, str], tiny: Path, tmp_path: Path
) -> None:
    garbage = tmp_path / "libvulkan_broken.so"
    garbage.write_bytes(b"\x7fELF this is not a driver")
    icd = tmp_path / "broken_icd.json"
    icd.write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": str(garbage), "api_version": "1.3.0"}}))
    env = {**no_python_env, "VK_ICD_FILENAMES": str(icd), "VK_DRIVER_FILES": str(icd)}
    placement = chat(frozen, env, tiny)["metrics"]["placement"]
    assert placement["backend"] == "cpu" and placement["n_gpu_layers"] == 0
    assert gpu_note(placement) == (
        "no GPU: Vulkan has no working driver here (VK_ERROR_INCOMPATIBLE_DRIVER), so every layer runs on the CPU"
    ), placement


def _loader_dir() -> Path:
    found = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in found.splitlines():
        if "libvulkan.so.1 " in line and "=>" in line:
            return Path(line.split("=>")[1].strip()).resolve().parent
    pytest.fail("the Vulkan loader is not installed here (apt-get install libvulkan1), so hiding it tests nothing")


def test_without_the_vulkan_loader_it_runs_on_the_cpu_and_says_so(
    frozen: Path, no_python_env: dict[str, str], tiny: Path, tmp_path: Path
) -> None:
    """The loader hidden in a mount namespace of the app's own: a copy of its library folder (hard
    links, so nothing is copied) without libvulkan is mounted over the real one."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hiding a system library needs root and unshare (util-linux); CI runs as root")
    libdir = _loader_dir()
    copy = tmp_path / "libs"
    if os.stat(libdir).st_dev != os.stat(tmp_path).st_dev:
        pytest.fail(f"{libdir} and {tmp_path} are on different file systems: set TMPDIR to a folder beside {libdir}")
    subprocess.run(["cp", "-al", str(libdir), str(copy)], check=True)
    for lib in copy.glob("libvulkan.so*"):
        lib.unlink()
    # unshare's own environment: PATH for mount and the app itself (the app's env is no_python_env's)
    app_env = " ".join(shlex.quote(f"{k}={v}") for k, v in no_python_env.items())
    script = f'mount --bind {shlex.quote(str(copy))} {shlex.quote(str(libdir))} && exec env -i {app_env} "$@"'
    placement = chat(frozen, {**os.environ}, tiny, prefix=["unshare", "-m", "sh", "-c", script, "sh"])["metrics"]["placement"]
    assert placement["backend"] == "cpu" and placement["n_gpu_layers"] == 0
    assert gpu_note(placement) == (
        "no GPU: the Vulkan loader (libvulkan.so.1, package libvulkan1) is not installed, so every layer runs on the CPU"
    ), placement
