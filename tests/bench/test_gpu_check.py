"""The GPU check's parts that need no GPU (bench/gpu_check.sh, bench/gpu_check/, docs/decisions/gpu-check.md):
nvidia-smi's per-process figure, the goals' verdict, the architecture read from a stand-in
nvidia-smi, the sdist trim and the bundle check on fabricated folders, the random model, the
bundled sources reaching Cove's tools build, and a CPU dry run of the whole script."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.speed import llama_tools
from app.speed.gpu_readout import nvidia_smi_process_mib, parse_compute_apps
from app.speed.report import build_report, format_table
from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "gpu_check.sh"
HELPERS = REPO_ROOT / "bench" / "gpu_check"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", HELPERS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


verdict = _load("verdict")
bundle = _load("bundle")
random_model = _load("random_model")


# nvidia-smi's figure for one process

SMI_ROWS = "4242, 1320\n999, 5000\n4242, 200\n"


def test_parse_compute_apps_sums_the_rows_of_one_process() -> None:
    assert parse_compute_apps(SMI_ROWS, 4242) == 1520  # one process on two GPUs
    assert parse_compute_apps(SMI_ROWS, 999) == 5000
    assert parse_compute_apps(SMI_ROWS, 42) is None  # 42 is not 4242's prefix match
    assert parse_compute_apps("4242, [N/A]\n", 4242) is None
    assert parse_compute_apps("", 4242) is None


def test_nvidia_smi_process_mib_runs_the_query_and_gives_up_quietly() -> None:
    seen: list[list[str]] = []

    def run(cmd: list[str], **_kw: Any) -> Any:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, SMI_ROWS, "")

    assert nvidia_smi_process_mib(4242, run=run, which=lambda _n: "/x/nvidia-smi") == 1520
    assert seen == [["/x/nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]]
    assert nvidia_smi_process_mib(4242, run=run, which=lambda _n: None) is None
    failed = lambda cmd, **_kw: subprocess.CompletedProcess(cmd, 9, "", "NVIDIA-SMI has failed")  # noqa: E731
    assert nvidia_smi_process_mib(4242, run=failed, which=lambda _n: "/x/nvidia-smi") is None
    assert nvidia_smi_process_mib(None, run=run, which=lambda _n: "/x/nvidia-smi") is None


# The report and the verdict

GPU_PLACEMENT = {
    "backend": "cuda",
    "device": "NVIDIA H200",
    "n_layers": 17,
    "n_gpu_layers": 17,
    "kv_on_gpu": True,
    "vram_estimate": 1400 * 2**20,
    "vram_used": 1300 * 2**20,
}


def _report(
    *,
    cove_tps: tuple[float, float] = (5000.0, 400.0),
    ref_tps: tuple[float, float] = (5100.0, 410.0),
    placement: dict[str, Any] | None = None,
    ref_ngl: int = 17,
    readout: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cove = {
        "pp_tps": cove_tps[0],
        "tg_tps": cove_tps[1],
        "n_prompt": 512,
        "n_gen": 128,
        "placement": GPU_PLACEMENT if placement is None else placement,
    }
    ref = {"pp_tps": ref_tps[0], "tg_tps": ref_tps[1], "n_gpu_layers": ref_ngl}
    if readout is None:
        readout = {"engine_pid": 4242, "after_load_mib": 1320, "after_runs_mib": 1500}
    return build_report("m.gguf", threads=16, reps=5, cove=cove, llama_bench=ref, readout=readout)


def test_the_report_carries_the_engine_pid_and_nvidia_smi_beside_the_engines_readout() -> None:
    report = _report()
    assert report["engine_pid"] == 4242
    smi = report["nvidia_smi"]
    assert smi["after_load_mib"] == 1320 and smi["after_runs_mib"] == 1500
    assert smi["engine_vram_used_mib"] == pytest.approx(1300.0)
    assert smi["vram_ratio"] == pytest.approx(1300 / 1320)
    table = format_table(report)
    assert "17 of 17 layers on NVIDIA H200" in table and "1320 MiB after loading" in table


def test_without_nvidia_smi_the_report_says_none() -> None:
    report = _report(readout={"engine_pid": 7, "after_load_mib": None, "after_runs_mib": None})
    assert report["nvidia_smi"] is None and report["engine_pid"] == 7
    assert "nvidia-smi" not in format_table(report)


def test_every_goal_passes_when_cove_keeps_up_and_the_readout_agrees() -> None:
    results = {g.name: g for g in verdict.goals(_report())}
    assert [g.name for g in verdict.goals(_report())] == ["tg", "pp", "ngl", "vram"]
    assert all(g.passed for g in results.values()), [g.line() for g in results.values()]
    assert "0.976 x llama-bench" in results["tg"].detail
    assert results["vram"].line().startswith("PASS  vram")
    assert "after the runs 1500 MiB" in results["vram"].detail


@pytest.mark.parametrize(
    ("kwargs", "failing"),
    [
        ({"cove_tps": (5000.0, 380.0)}, {"tg"}),  # 380 / 410 = 0.927
        ({"cove_tps": (4000.0, 400.0)}, {"pp"}),
        ({"ref_ngl": 99}, {"ngl"}),  # llama-bench did not run with Cove's layers
        ({"placement": {**GPU_PLACEMENT, "n_gpu_layers": 0, "backend": "cpu"}, "ref_ngl": 0}, {"ngl"}),
        ({"readout": {"engine_pid": 1, "after_load_mib": 1100, "after_runs_mib": None}}, {"vram"}),  # 1300/1100
        ({"readout": {"engine_pid": 1, "after_load_mib": None, "after_runs_mib": None}}, {"vram"}),
        ({"placement": {**GPU_PLACEMENT, "vram_used": None}}, {"vram"}),
    ],
)
def test_each_goal_fails_on_its_own(kwargs: dict[str, Any], failing: set[str]) -> None:
    results = verdict.goals(_report(**kwargs))
    assert {g.name for g in results if not g.passed} == failing, [g.line() for g in results]


def test_verdict_main_exit_status_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report()))
    assert verdict.main([str(good)]) == 0
    bad = tmp_path / "slow.json"
    bad.write_text(json.dumps(_report(cove_tps=(5000.0, 100.0))))
    assert verdict.main([str(bad)]) == 1
    assert "FAIL  tg" in capsys.readouterr().out
    (tmp_path / "text.json").write_text("cove bench: warning\n")
    assert verdict.main([str(tmp_path / "text.json")]) == 2
    assert verdict.main([str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert "is not JSON" in err and "could not be read" in err and "Traceback" not in err


# gpu_check.sh's architecture and tool checks, with a stand-in nvidia-smi on PATH


def _fake_nvidia_smi(folder: Path, compute_caps: str, list_rc: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\ncase "$*" in *compute_cap*) printf "{compute_caps}";; -L) exit {list_rc};; esac\n')
    exe.chmod(0o755)
    return folder


def _run_script(
    *args: str, path_first: Path | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = env or {k: v for k, v in os.environ.items() if k != "COVE_HOME"}
    path = "/usr/bin:/bin"
    environ = {**base, "PATH": f"{path_first}:{path}" if path_first else path}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=600)


@pytest.mark.parametrize(("caps", "arch"), [("9.0\n", "90"), ("8.6\n9.0\n8.6\n", "86;90"), ("12.0\n", "120")])
def test_print_arch_reads_nvidia_smis_compute_capability(tmp_path: Path, caps: str, arch: str) -> None:
    done = _run_script("--print-arch", path_first=_fake_nvidia_smi(tmp_path / "bin", caps.replace("\n", "\\n")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == arch


def test_print_arch_without_a_figure_or_without_nvidia_smi_says_so(tmp_path: Path) -> None:
    done = _run_script("--print-arch", path_first=_fake_nvidia_smi(tmp_path / "bin", "[N/A]\\n"))
    assert done.returncode == 1
    assert "reported no compute capability" in done.stderr and "--arch" in done.stderr
    done = _run_script("--print-arch", path_first=tmp_path / "empty")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "nvidia-smi is not on PATH" in done.stderr


def test_the_run_stops_with_one_sentence_when_the_driver_does_not_answer(tmp_path: Path) -> None:
    done = _run_script("--work", str(tmp_path / "w"), path_first=_fake_nvidia_smi(tmp_path / "bin", "9.0\\n", list_rc=9))
    assert done.returncode == 1
    assert "nvidia-smi cannot talk to the driver" in done.stderr and "Traceback" not in done.stderr
    done = _run_script("--work", str(tmp_path / "w"), path_first=tmp_path / "empty")
    assert done.returncode == 1 and "nvidia-smi is not on PATH" in done.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--reps", "0"], "--reps must be"),
        (["--shape", "7b"], "--shape must be 1b or tiny"),
        (["--arch", "sm_90"], "--arch must look like"),
        (["--model"], "--model needs a value"),
        (["--bogus"], "unknown option '--bogus'"),
        (["--wheel", "x.whl", "--venv", "v"], "do not go together"),
    ],
)
def test_bad_usage_is_one_sentence_and_status_2(tmp_path: Path, args: list[str], fragment: str) -> None:
    done = _run_script(*args, "--work", str(tmp_path / "w"))
    assert done.returncode == 2
    assert fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1


# The bundle: the sdist trim and the contents check


def _fake_sdist_tree(root: Path) -> Path:
    """A folder shaped like the sdist: every part the trim keeps, and some of what it drops."""
    keep_files = [
        "CMakeLists.txt",
        "pyproject.toml",
        "PKG-INFO",
        "llama_cpp/__init__.py",
        "vendor/llama.cpp/CMakeLists.txt",
        "vendor/llama.cpp/tools/ui/CMakeLists.txt",
        "vendor/llama.cpp/tools/mtmd/mtmd.cpp",
    ]
    keep_dirs = [
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
        "vendor/llama.cpp/gguf-py",
    ]
    drop = [
        ".git/objects/pack/big.pack",
        "vendor/llama.cpp/models/ggml-vocab-llama.gguf",
        "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp",
        "vendor/llama.cpp/tools/mtmd/test-1.mp4",
        "vendor/llama.cpp/tools/ui/src/app.ts",
        "vendor/llama.cpp/docs/build.md",
    ]
    for rel in keep_files + drop:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    for rel in keep_dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
        (root / rel / "f.c").write_text("x")
    return root


def test_trim_drops_what_the_builds_do_not_read_and_keeps_the_rest(tmp_path: Path) -> None:
    root = _fake_sdist_tree(tmp_path / "llama_cpp_python-0.3.36")
    removed = bundle.trim_tree(root)
    assert {
        ".git",
        "vendor/llama.cpp/models",
        "vendor/llama.cpp/ggml/src/ggml-vulkan",
        "vendor/llama.cpp/tools/ui/src",
        "vendor/llama.cpp/docs",
    } <= set(removed)
    assert not (root / ".git").exists() and not (root / "vendor/llama.cpp/tools/mtmd/test-1.mp4").exists()
    assert (root / "vendor/llama.cpp/tools/mtmd/mtmd.cpp").is_file()
    assert (root / "vendor/llama.cpp/ggml/src/ggml-cuda/f.c").is_file()


def test_trim_fails_when_a_needed_part_is_missing(tmp_path: Path) -> None:
    root = _fake_sdist_tree(tmp_path / "llama_cpp_python-0.3.36")
    (root / "vendor/llama.cpp/ggml/src/ggml-cuda/f.c").unlink()
    (root / "vendor/llama.cpp/ggml/src/ggml-cuda").rmdir()
    with pytest.raises(bundle.BundleError, match="ggml-cuda"):
        bundle.trim_tree(root)


def test_trim_sdist_writes_an_archive_of_the_same_name(tmp_path: Path) -> None:
    root = _fake_sdist_tree(tmp_path / "src" / "llama_cpp_python-0.3.36")
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    out = bundle.trim_sdist(sdist, tmp_path / "out")
    assert out.name == sdist.name
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/src/ggml-cuda/f.c" in names
    assert not any("/.git" in n or "ggml-vulkan" in n for n in names)
    assert bundle.main(["trim", str(tmp_path / "absent.tar.gz"), str(tmp_path / "o")]) == 1


def _fake_bundle(folder: Path) -> Path:
    for part in bundle.BUNDLE_PARTS:
        (folder / part).parent.mkdir(parents=True, exist_ok=True)
        (folder / part).write_text("x")
    (folder / "sdist").mkdir()
    (folder / "sdist" / "llama_cpp_python-0.3.36.tar.gz").write_bytes(b"x")
    (folder / "wheels").mkdir()
    for prefix in bundle.BUNDLE_WHEELS:
        (folder / "wheels" / f"{prefix}1.0-py3-none-any.whl").write_bytes(b"x")
    return folder


def test_check_bundle_finds_missing_parts_and_an_archive_over_the_limit(tmp_path: Path) -> None:
    folder = _fake_bundle(tmp_path / "cove-gpu-check")
    archive = tmp_path / "b.tar"
    archive.write_bytes(b"\0" * 2048)
    assert bundle.check_bundle(folder, archive) == []
    assert bundle.check_bundle(folder, archive, limit=1024) == ["b.tar is 0.0 MiB, over the 0 MiB limit"]
    (folder / "wheels" / "numpy-1.0-py3-none-any.whl").unlink()
    (folder / "gpu_check" / "verdict.py").unlink()
    assert bundle.check_bundle(folder) == ["gpu_check/verdict.py is missing", "no numpy-*.whl in wheels/"]
    assert bundle.main(["check", str(folder)]) == 1
    assert bundle.main(["nonsense"]) == 2


# The random model


def test_the_random_model_is_a_q8_0_llama_the_bench_can_read(tmp_path: Path) -> None:
    from gguf import GGMLQuantizationType, GGUFReader

    from app.speed.runner import vocab_info

    path = random_model.write_model(tmp_path / "m.gguf", random_model.SHAPES["tiny"])
    reader = GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    shape = random_model.SHAPES["tiny"]
    assert len(tensors) == 3 + 9 * shape.n_layer
    assert tensors["blk.0.ffn_up.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert list(tensors["blk.1.ffn_down.weight"].shape) == [shape.n_ff, shape.n_embd]
    assert list(tensors["blk.0.attn_k.weight"].shape) == [shape.n_embd, shape.n_head_kv * shape.n_embd // shape.n_head]
    assert vocab_info(path) == (shape.n_vocab, 1)
    # The fixed scale: every block's first two bytes are fp16 SCALE.
    import numpy as np

    data = np.asarray(tensors["blk.0.attn_q.weight"].data).reshape(-1, random_model.Q8_0_BYTES)
    assert (data[:, :2].copy().view(np.float16) == np.float16(random_model.SCALE)).all()


def test_the_random_model_loads_in_llama_cpp(tmp_path: Path) -> None:
    import llama_cpp

    from app.engine.host.cpu_quirks import extra_buffers
    from app.engine.host.llama_open import model_buffers

    path = random_model.write_model(tmp_path / "m.gguf", random_model.SHAPES["tiny"])
    # Loaded as the engine loads it: on a processor with AMX, this llama.cpp's AMX weight path
    # crashes in llama_decode (app/engine/host/cpu_quirks.py), so its extra buffers stay off there.
    with model_buffers(extra_buffers()[0]):
        llm = llama_cpp.Llama(str(path), n_ctx=64, n_threads=1, verbose=False)
    try:
        assert llm.n_vocab() == random_model.SHAPES["tiny"].n_vocab
        out = llm.create_completion("hello", max_tokens=4, temperature=0.8)
        assert out["usage"]["completion_tokens"] >= 1
    finally:
        llm.close()


def test_random_model_cli_says_when_the_folder_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert random_model.main([str(tmp_path / "no" / "m.gguf"), "--shape", "tiny"]) == 2
    assert "does not exist" in capsys.readouterr().err


# The bundled sources reach Cove's tools build


def test_local_sdist_is_checked_by_name_and_presence(tmp_path: Path) -> None:
    assert llama_tools.local_sdist("0.3.36", {}) is None
    with pytest.raises(llama_tools.LlamaToolError, match="must name llama_cpp_python-0.3.36.tar.gz"):
        llama_tools.local_sdist("0.3.36", {"COVE_LLAMA_SDIST": str(tmp_path / "other.tar.gz")})
    with pytest.raises(llama_tools.LlamaToolError, match="does not exist"):
        llama_tools.local_sdist("0.3.36", {"COVE_LLAMA_SDIST": str(tmp_path / "llama_cpp_python-0.3.36.tar.gz")})


def test_the_tools_build_takes_the_local_sdist_without_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_sdist_tree(tmp_path / "src" / "llama_cpp_python-0.3.36")
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    monkeypatch.setenv("COVE_LLAMA_SDIST", str(sdist))

    def no_pip(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("pip must not run when COVE_LLAMA_SDIST is set")

    monkeypatch.setattr(llama_tools.subprocess, "run", no_pip)
    (tmp_path / "work").mkdir()
    source = llama_tools._download_sdist("0.3.36", tmp_path / "work", llama_tools.LLAMA_TOOLS, lambda _m: None)
    assert (source / "vendor/llama.cpp/tools/llama-bench/f.c").is_file()
    sdist.write_bytes(b"not a tar archive")
    with pytest.raises(llama_tools.LlamaToolError, match="could not be extracted"):
        llama_tools._download_sdist("0.3.36", tmp_path / "work2", llama_tools.LLAMA_TOOLS, lambda _m: None)


# A dry run of the whole script on the CPU: this venv, the tiny random model, the cached tools


@pytest.mark.slow_build
def test_cpu_dry_run_of_the_whole_script(tmp_path: Path) -> None:
    from tests.support.llama_server import tools_cache

    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "tools").symlink_to(tools_cache())  # built once per test run (slow_build)
    env = {k: v for k, v in os.environ.items() if k != "COVE_HOME"}
    env["COVE_HOME"] = str(home)
    venv = Path(sys.prefix)
    done = _run_script("--cpu", "--venv", str(venv), "--reps", "1", "--work", str(tmp_path / "w"), path_first=venv / "bin", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    for step in ("[1 tools] took", "[2 venv] took", "[3 builds] took", "[4 model] took", "[5 bench] took"):
        assert step in done.stderr
    report = json.loads((tmp_path / "w" / "bench.json").read_text())
    assert report["engine_pid"] and report["nvidia_smi"] is None  # no nvidia-smi on this PATH
    assert report["cove"]["placement"]["n_gpu_layers"] == 0
    argv = report["llama_bench"]["command"]
    assert argv[argv.index("-ngl") + 1] == "0"
    assert "--cpu dry run" in done.stdout
    lines = [ln for ln in done.stdout.splitlines() if ln[:4] in ("PASS", "FAIL")]
    assert [ln.split()[1] for ln in lines] == ["tg", "pp", "ngl", "vram", "time"]
