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
) -> dict[str, Any]:
    """The JSON-ready object: {"model", "threads", "repetitions", "cove", "llama_bench", "ratio"}."""
    report: dict[str, Any] = {
        "model": str(model_path),
        "threads": threads,
        "repetitions": reps,
        "n_prompt": cove.get("n_prompt"),
        "n_gen": cove.get("n_gen"),
        "cove": cove,
        "llama_bench": llama_bench,
        "ratio": None,
    }
    if llama_bench is not None:
        report["ratio"] = {
            "pp": ratio(cove.get("pp_tps"), llama_bench.get("pp_tps")),
            "tg": ratio(cove.get("tg_tps"), llama_bench.get("tg_tps")),
        }
    return report


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
    if ref is not None and ref.get("build_commit"):
        lines.append("")
        lines.append(f"llama-bench build {ref['build_commit']} ({ref.get('build_number', '?')}), same GGUF, same threads")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"
