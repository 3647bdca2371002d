"""`cove bench`: prompt (pp) and generation (tg) speed through Cove's engine host, and,
on request, the same tests run by llama.cpp's own llama-bench built from the pinned sources.

`bench_main` is the one entry the command line calls; results go to `out`, progress to `err`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from app.speed.gpu_readout import nvidia_smi_process_mib
from app.speed.llama_bench import DEFAULT_VERSION, LlamaBenchError, ensure_llama_bench, merge_runs, run_llama_bench
from app.speed.report import build_report, format_json, format_table
from app.speed.runner import engine_settings, run_cove_bench

N_PROMPT = 512  # llama-bench's -p default
N_GEN = 128  # llama-bench's -n default

__all__ = ["bench_main", "default_threads", "llama_bench_args", "LlamaBenchError"]


def default_threads() -> int:
    """Physical cores we may run on, like llama-bench's default `-t` (which also leaves out E-cores).

    Always passed explicitly to both sides, so their defaults never decide the comparison.
    """
    import os

    import psutil

    n = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        n = min(n, len(os.sched_getaffinity(0)))
    return max(1, n)


def _other_load() -> float | None:
    """The 1-minute load average when it says other work is competing for the cores, else None."""
    import os

    import psutil

    try:
        load = psutil.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    return load if load > 0.5 * (os.cpu_count() or 1) else None


def llama_bench_args(settings: dict[str, Any]) -> list[str]:
    """Explicit llama-bench flags that pin it to the context settings Cove's engine used.

    llama-bench's defaults (tools/llama-bench/llama-bench.cpp, cmd_params_defaults) are
    -b 2048 -ub 512 -ctk f16 -ctv f16 -fa auto -ngl all(-1) -lm auto, --repack 1, poll 50, warmup on.
    Cove's engine reports its own values; each one it reports is passed to llama-bench so
    both sides run the same configuration, whatever either side's defaults are.
    """
    args: list[str] = []
    flags = (
        ("n_batch", "-b"),
        ("n_ubatch", "-ub"),
        ("type_k", "-ctk"),
        ("type_v", "-ctv"),
        ("flash_attn", "-fa"),
        ("n_gpu_layers", "-ngl"),
        ("load_mode", "-lm"),
        ("repack", "--repack"),
    )
    for key, flag in flags:
        value = settings.get(key)
        if value is None:
            continue
        if key == "flash_attn" and isinstance(value, bool):
            value = "on" if value else "off"
        args += [flag, str(value)]
    return args


def bench_main(
    model_path: str | Path,
    *,
    threads: int | None,
    reps: int,
    compare: bool,
    as_json: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run the benchmark and print the table (or one JSON object). Returns the exit status."""
    from app.engine.client import EngineClient, EngineError  # the engine is only needed here
    from app.paths import resolve_paths

    def progress(message: str) -> None:
        print(f"cove bench: {message}", file=err, flush=True)

    if reps < 1:
        print("cove: --reps must be at least 1", file=err)
        return 2
    threads = threads or default_threads()
    busy = _other_load()
    if busy is not None:
        progress(f"warning: the CPU is already busy (load average {busy:.1f}); the figures will be noisy")
    try:
        binary = ensure_llama_bench(resolve_paths().tools_dir, DEFAULT_VERSION, log=progress) if compare else None
        client = EngineClient()
        reference_runs: list[dict[str, Any]] = []
        # nvidia-smi's figure for the engine host, read once the model is loaded (the moment
        # the engine reads its own through NVML) and again after the runs, while the engine
        # still holds the model; both None without nvidia-smi.
        readout: dict[str, Any] = {"engine_pid": None, "after_load_mib": None, "after_runs_mib": None}

        def after_load(_loaded: Any) -> None:
            readout["engine_pid"] = client.host_pid
            readout["after_load_mib"] = nvidia_smi_process_mib(client.host_pid)

        try:
            loaded_settings: dict[str, Any] = {}

            def reference_round(i: int) -> None:
                # One llama-bench repetition per round (see run_cove_bench). The engine host
                # sits idle meanwhile: it holds the model but uses no CPU.
                assert binary is not None and client.loaded is not None
                if not loaded_settings:
                    loaded_settings.update(engine_settings(client.loaded, threads))
                progress(f"llama-bench pp{N_PROMPT} and tg{N_GEN}, round {i + 1}/{reps}")
                reference_runs.append(
                    run_llama_bench(
                        binary,
                        model_path,
                        threads,
                        1,
                        N_PROMPT,
                        N_GEN,
                        extra_args=llama_bench_args(loaded_settings),
                    )
                )

            cove = run_cove_bench(
                client,
                model_path,
                threads=threads,
                reps=reps,
                n_prompt=N_PROMPT,
                n_gen=N_GEN,
                log=progress,
                reference_round=reference_round if binary is not None else None,
                after_load=after_load,
            )
            readout["after_runs_mib"] = nvidia_smi_process_mib(client.host_pid)
        finally:
            client.close()
        reference = merge_runs(reference_runs) if reference_runs else None
    except (LlamaBenchError, EngineError, RuntimeError, ValueError) as exc:
        print(f"cove: {exc}", file=err)
        return 1
    report = build_report(model_path, threads=threads, reps=reps, cove=cove, llama_bench=reference, readout=readout)
    print(format_json(report) if as_json else format_table(report), file=out)
    return 0
