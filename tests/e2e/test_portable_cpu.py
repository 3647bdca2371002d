"""The frozen app's llama.cpp runs on older x86-64 CPUs: its engine host, run under qemu-user
as a CPU without AVX2 (Snowridge, the Atom-class core of cheap laptops) and as one with AVX but
not AVX2 (SandyBridge), loads the tiny model, picks a CPU variant that CPU runs, and writes
tokens; a build whose variants the CPU cannot run says so in one sentence.

Marked `packaging` (it builds the app): `QT_QPA_PLATFORM=offscreen .venv/bin/python -m pytest
-m packaging`. Needs qemu-user (`apt-get install qemu-user`; .ci/run installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.child_command import CHILD_FLAG
from app.engine.protocol import Failed, Finished, Generate, Load, Loaded, Token, decode, encode
from tests.support.tiny_model import write_tiny_gguf

# qemu's CPU models and the llama.cpp CPU variant each should get (ggml's x86 variants).
CPUS = {"Snowridge": "sse42", "SandyBridge": "sandybridge"}


@pytest.fixture(scope="session")
def qemu() -> str:
    path = shutil.which("qemu-x86_64") or shutil.which("qemu-x86_64-static")
    if path is None:
        pytest.fail("qemu-user is not installed: apt-get install qemu-user (.ci/run installs it)")
    return path


def _emulated_env(frozen: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` plus what PyInstaller's bootloader sets before it starts itself again (with execve,
    to apply LD_LIBRARY_PATH): qemu-user does not follow an execve, so without these the app
    would run natively from there on. With them the bootloader goes straight on, emulated."""
    return {
        **env,
        "_PYI_ARCHIVE_FILE": str(frozen / "cove"),
        "_PYI_PARENT_PROCESS_LEVEL": "-1",
        "_PYI_LINUX_PROCESS_NAME": "cove",
        "LD_LIBRARY_PATH": str(frozen / "_internal"),
    }


def _host_under_qemu(qemu: str, cpu: str, frozen: Path, model: Path, env: dict[str, str]) -> tuple[list, set[str]]:
    """Run the frozen engine host as `cpu`, load `model` and ask for 8 tokens. Returns the events
    and the llama.cpp CPU libraries the process mapped."""
    env = _emulated_env(frozen, env)
    proc = subprocess.Popen(
        [qemu, "-cpu", cpu, str(frozen / "cove"), CHILD_FLAG, "app.engine.host.main", "--in-fd", "0", "--out-fd", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    events: list = []
    mapped: set[str] = set()
    try:
        proc.stdin.write(encode(Load("l1", str(model), n_ctx=256, n_threads=1)))
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                break
            event = decode(line)
            events.append(event)
            if isinstance(event, Loaded):
                maps = Path(f"/proc/{proc.pid}/maps").read_text()
                mapped = set(re.findall(r"libggml-cpu[\w.-]*\.so", maps))
                proc.stdin.write(encode(Generate("g1", None, [{"role": "user", "content": "hi"}], max_tokens=8, seed=1, temperature=0.0)))
                proc.stdin.flush()
            if isinstance(event, (Finished, Failed)):
                break
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode != -4, "SIGILL: the build used an instruction this CPU lacks"
    return events, mapped


@pytest.mark.packaging
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_the_frozen_engine_writes_tokens_on_a_cpu_without_avx2(frozen: Path, qemu: str, cpu: str, tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    events, mapped = _host_under_qemu(qemu, cpu, frozen, model, env)
    failed = [e for e in events if isinstance(e, Failed)]
    assert not failed, failed
    loaded = next(e for e in events if isinstance(e, Loaded))
    assert loaded.backend == "cpu" and loaded.placement["n_gpu_layers"] == 0
    assert mapped == {f"libggml-cpu-{CPUS[cpu]}.so"}  # the best variant this CPU runs, and no other
    tokens = [e for e in events if isinstance(e, Token)]
    finished = next(e for e in events if isinstance(e, Finished))
    assert len(tokens) >= 1 and finished.metrics["gen_tokens"] >= 1


@pytest.mark.packaging
@pytest.mark.timeout(1800)
def test_a_cpu_too_old_for_every_variant_gets_a_sentence(frozen: Path, qemu: str, tmp_path: Path) -> None:
    # Only the AVX2 (haswell) variant next to the other libraries: a Snowridge core runs none.
    libs = tmp_path / "lib"
    libs.mkdir()
    for lib in (frozen / "_internal" / "llama_cpp" / "lib").iterdir():
        if not lib.name.startswith("libggml-cpu-") or lib.name == "libggml-cpu-haswell.so":
            shutil.copy2(lib, libs / lib.name)
    assert (libs / "libggml-cpu-haswell.so").is_file()
    model = tmp_path / "tiny.gguf"
    write_tiny_gguf(model)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8", "LLAMA_CPP_LIB_PATH": str(libs)}
    events, _mapped = _host_under_qemu(qemu, "Snowridge", frozen, model, env)
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and not any(isinstance(e, Loaded) for e in events)
    assert "processor" in failed[0].message and "lacks the instructions" in failed[0].message
    assert "Traceback" not in failed[0].message
