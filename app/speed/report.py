"""Turn bench results into the one JSON object of `cove bench --json` and the human table.

Ratios are always cove / llama-bench, so 1.0 means Cove runs as fast as llama.cpp's own
benchmark and 0.95 means 5 % slower.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def ratio(cove: float | None, reference: float | None) -> float | None:
    if cove is None or reference is None or reference <= 0:
        return None
    return cove / reference


def build_report(
    model_path: Path | str,
    *,
    threads: int,
    reps: int,
    cove: dict[str, Any],
    llama_bench: dict[str, Any] | None = None,
    readout: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-ready object: {"model", "threads", "repetitions", "cove", "llama_bench", "ratio",
    "engine_pid", "nvidia_smi"}.

    `readout` is bench_main's {"engine_pid", "after_load_mib", "after_runs_mib"}: the engine
    host's process id and nvidia-smi's MiB for it. "nvidia_smi" is None when nvidia-smi gave
    no figure; else those two figures and "vram_ratio", the engine's own readout
    (cove.placement.vram_used, in bytes) over nvidia-smi's after-load figure.
    """
    report: dict[str, Any] = {
        "model": str(model_path),
        "threads": threads,
        "repetitions": reps,
        "n_prompt": cove.get("n_prompt"),
        "n_gen": cove.get("n_gen"),
        "cove": cove,
        "llama_bench": llama_bench,
        "ratio": None,
        "engine_pid": (readout or {}).get("engine_pid"),
        "nvidia_smi": vram_readout(cove.get("placement") or {}, readout or {}),
    }
    if llama_bench is not None:
        report["ratio"] = {
            "pp": ratio(cove.get("pp_tps"), llama_bench.get("pp_tps")),
            "tg": ratio(cove.get("tg_tps"), llama_bench.get("tg_tps")),
        }
    return report


def vram_readout(placement: dict[str, Any], readout: dict[str, Any]) -> dict[str, Any] | None:
    """nvidia-smi's figures beside the engine's, or None when nvidia-smi gave none."""
    after_load, after_runs = readout.get("after_load_mib"), readout.get("after_runs_mib")
    if after_load is None and after_runs is None:
        return None
    used = placement.get("vram_used")
    engine_mib = used / 2**20 if isinstance(used, (int, float)) else None
    return {
        "after_load_mib": after_load,
        "after_runs_mib": after_runs,
        "engine_vram_used_mib": engine_mib,
        "vram_ratio": ratio(engine_mib, after_load),
    }


def format_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str)


def format_table(report: dict[str, Any]) -> str:
    """A few aligned lines: one row per test, Cove's median, llama-bench's median, the ratio."""
    cove = report["cove"]
    ref = report.get("llama_bench")
    ratios = report.get("ratio") or {}
    lines = [
        f"model        {Path(report['model']).name}",
        f"threads      {report['threads']}",
        f"repetitions  {report['repetitions']} (medians of tokens per second)",
    ]
    settings = cove.get("settings") or {}
    if settings:
        lines.append("settings     " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    lines.append("")
    header = f"{'test':<8}{'cove tok/s':>14}"
    if ref is not None:
        header += f"{'llama-bench tok/s':>20}{'ratio':>9}"
    lines.append(header)
    for key, label in (("pp", f"pp{cove.get('n_prompt', '')}"), ("tg", f"tg{cove.get('n_gen', '')}")):
        row = f"{label:<8}{_num(cove.get(f'{key}_tps')):>14}"
        if ref is not None:
            row += f"{_num(ref.get(f'{key}_tps')):>20}{_num(ratios.get(key), 3):>9}"
        lines.append(row)
    if cove.get("tg_llama_perf_tps") is not None:
        lines.append("")
        lines.append(
            f"cross-check inside Cove (llama.cpp perf counters): pp {_num(cove.get('pp_llama_perf_tps'))}, "
            f"tg {_num(cove.get('tg_llama_perf_tps'))} tok/s decode only; "
            f"{_pct(cove.get('tg_share_outside_decode'))} of tg time is outside llama_decode "
            "(sampling, Python, pipe)"
        )
        parts = cove.get("tg_outside_parts") or {}
        if parts:
            lines.append("  by part: " + ", ".join(f"{name} {_pct(share)}" for name, share in parts.items()))
    placement = cove.get("placement") or {}
    smi = report.get("nvidia_smi")
    if placement.get("n_gpu_layers"):
        used = placement.get("vram_used")
        lines.append("")
        lines.append(
            f"placement    {placement['n_gpu_layers']} of {placement.get('n_layers', '?')} layers on "
            f"{placement.get('device', 'the GPU')}; engine's VRAM readout " + ("n/a" if used is None else f"{used / 2**20:.0f} MiB")
        )
    if smi is not None:
        lines.append(
            f"nvidia-smi   {_num(smi.get('after_load_mib'), 0)} MiB after loading, "
            f"{_num(smi.get('after_runs_mib'), 0)} MiB after the runs (engine process {report.get('engine_pid')}); "
            f"readout ratio {_num(smi.get('vram_ratio'), 3)}"
        )
    if ref is not None and ref.get("build_commit"):
        lines.append("")
        lines.append(f"llama-bench build {ref['build_commit']} ({ref.get('build_number', '?')}), same GGUF, same threads")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"
