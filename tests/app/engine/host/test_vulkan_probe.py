"""Why the Vulkan backend gave no GPU, as the placement note says it: the sentences for each
state, and the real loader asked (absent, or present without a working driver)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

from app.engine.host.vulkan_probe import VulkanDevice, VulkanState, no_gpu_reason, probe, ships_vulkan
from tests.support.paths import REPO_ROOT


def test_each_reason_says_what_stands_in_the_way() -> None:
    missing = no_gpu_reason(VulkanState(problem="the Vulkan loader (libvulkan.so.1, package libvulkan1) is not installed"))
    assert missing == ("no GPU: the Vulkan loader (libvulkan.so.1, package libvulkan1) is not installed, so every layer runs on the CPU")
    software = no_gpu_reason(VulkanState(devices=(VulkanDevice("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU"),)))
    assert "Vulkan offers only llvmpipe (LLVM 15.0.6, 256 bits), a software device" in software
    assert "GGML_VK_VISIBLE_DEVICES=0" in software
    odd = no_gpu_reason(VulkanState(devices=(VulkanDevice("Some GPU", "GPU"), VulkanDevice("llvmpipe", "CPU"))))
    assert odd == "no GPU: llama.cpp's Vulkan backend could not use Some GPU (GPU), llvmpipe (CPU), so every layer runs on the CPU"


def test_a_missing_loader_is_named() -> None:
    state = probe("libvulkan-that-does-not-exist.so.1")
    assert state.devices == () and state.problem == "the Vulkan loader (libvulkan.so.1, package libvulkan1) is not installed"


def test_a_file_that_is_not_a_library_is_not_called_missing(tmp_path: Path) -> None:
    broken = tmp_path / "libvulkan.so.1"
    broken.write_bytes(b"not an ELF file")
    state = probe(str(broken))
    assert state.problem.startswith("the Vulkan loader cannot be opened (") and "not installed" not in state.problem


def _has_loader() -> bool:
    try:
        ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return False
    return True


def test_the_real_loader_without_a_driver_says_so(tmp_path: Path) -> None:
    # A process of its own: the loader reads VK_ICD_FILENAMES once, when it is first used.
    env = {**os.environ, "VK_ICD_FILENAMES": str(tmp_path / "no-such-driver.json"), "VK_DRIVER_FILES": str(tmp_path / "x.json")}
    done = subprocess.run(
        [sys.executable, "-c", "from app.engine.host.vulkan_probe import probe; print(probe())"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    if _has_loader():
        assert "Vulkan has no working driver here (VK_ERROR_INCOMPATIBLE_DRIVER)" in done.stdout
    else:  # a machine without libvulkan1 (the suite runs before .ci/run installs it)
        assert "is not installed" in done.stdout


def test_the_vulkan_backend_is_found_beside_the_others(tmp_path: Path) -> None:
    assert not ships_vulkan([tmp_path])
    (tmp_path / "libggml-vulkan.so").write_bytes(b"")
    assert ships_vulkan([tmp_path / "elsewhere", tmp_path])
