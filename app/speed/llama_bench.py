"""llama.cpp's `llama-bench` (built with llama.cpp's other tools by app/speed/llama_tools.py, from
the sources vendored in the pinned llama-cpp-python sdist, once, into Cove's tools cache, with
the engine's own configure): run it and parse its JSON output.
"""

from __future__ import annotations

import json
import shutil  # noqa: F401  (the build finds cmake through shutil.which; tests/app/speed/test_bench.py patches lb.shutil)
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.speed.llama_tools import DEFAULT_VERSION, LLAMA_TOOLS, LlamaToolError, binary_name, ensure_tool, library_env, tail_of
from app.speed.llama_tools import cmake_args as tool_cmake_args
from app.speed.llama_tools import tool_dir as tools_tool_dir

BINARY_NAME = binary_name("llama-bench")
LlamaBenchError = LlamaToolError  # a step of building or running llama-bench failed: one sentence

__all__ = [
    "DEFAULT_VERSION",
    "BINARY_NAME",
    "LlamaBenchError",
    "cmake_args",
    "ensure_llama_bench",
    "merge_runs",
    "parse_llama_bench_json",
    "run_llama_bench",
    "tool_dir",
]


def tool_dir(tools_dir: Path, version: str = DEFAULT_VERSION) -> Path:
    return tools_tool_dir(tools_dir, LLAMA_TOOLS, version)


def cmake_args(source_dir: Path, build_dir: Path, environ: dict[str, str] | None = None) -> list[str]:
    """The tools' configure: the engine's (llama_tools.cmake_args) with the tools and the server on."""
    return tool_cmake_args(source_dir, build_dir, LLAMA_TOOLS, environ)


def ensure_llama_bench(tools_dir: Path, version: str = DEFAULT_VERSION, log: Callable[[str], None] = print) -> Path:
    """Return the path of a built llama-bench for `version`, building llama.cpp's tools the first time."""
    return ensure_tool(tools_dir, "llama-bench", version, log)


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
        str(binary),
        "-m",
        str(model_path),
        "-t",
        str(threads),
        "-p",
        str(n_prompt),
        "-n",
        str(n_gen),
        "-r",
        str(reps),
        "-o",
        "json",
        *extra_args,
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
    env = library_env(binary)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, errors="replace")
    except OSError as exc:
        raise LlamaBenchError(f"llama-bench could not be started ({binary}): {exc}") from exc
    if done.returncode != 0:
        raise LlamaBenchError(f"llama-bench failed (exit {done.returncode}): {tail_of(done.stderr or done.stdout)}")
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
        "build_commit",
        "build_number",
        "cpu_info",
        "backends",
        "model_type",
        "n_threads",
        "n_batch",
        "n_ubatch",
        "type_k",
        "type_v",
        "flash_attn",
        "n_gpu_layers",
        "load_mode",
        "poll",
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
