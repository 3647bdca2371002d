"""Read `cove bench --compare-llama-bench --json` output and print the GPU check's goals, each
PASS or FAIL, for bench/gpu_check.sh:

  tg and pp: Cove's tokens/s at least 0.95 x llama-bench's, at the same -ngl
  vram:      the engine's VRAM readout (its placement's vram_used, through NVML) within 10 %
             of nvidia-smi's figure for the engine process, read at the same moment (after
             the load)
  ngl:       llama-bench ran with the layer count Cove's automatic placement chose, and that
             count is above 0 (the model went to the GPU at all)

nvidia-smi's figure after the runs is printed too, beside the goal: where it is larger, the
engine's device memory grew during the runs (CUDA's memory pool), which the readout taken
after the load does not include.

    python verdict.py BENCH.json          # exit 0: every goal met; 1: one or more missed; 2: bad input
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPEED_GOAL = 0.95
VRAM_TOLERANCE = 0.10


@dataclass(frozen=True)
class Goal:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name:<5} {self.detail}"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def goals(report: dict[str, Any]) -> list[Goal]:
    """The check's goals for one bench report (the JSON object `cove bench --json` prints)."""
    cove = report.get("cove") or {}
    ref = report.get("llama_bench") or {}
    placement = cove.get("placement") or {}
    out: list[Goal] = []
    for key in ("tg", "pp"):
        c, r = _num(cove.get(f"{key}_tps")), _num(ref.get(f"{key}_tps"))
        if c is None or r is None or r <= 0:
            out.append(Goal(key, False, "no figure from " + ("Cove" if c is None else "llama-bench")))
            continue
        ratio = c / r
        out.append(Goal(key, ratio >= SPEED_GOAL, f"{ratio:.3f} x llama-bench ({c:.1f} vs {r:.1f} tok/s; goal >= {SPEED_GOAL})"))
    ngl = placement.get("n_gpu_layers")
    ref_ngl = ref.get("n_gpu_layers")
    layers = placement.get("n_layers")
    if not isinstance(ngl, int) or ngl <= 0:
        out.append(Goal("ngl", False, f"Cove placed {ngl} layers on the GPU (backend {placement.get('backend')})"))
    else:
        same = ref_ngl == ngl
        out.append(Goal("ngl", same, f"Cove placed {ngl} of {layers} layers; llama-bench ran with -ngl {ref_ngl}"))
    smi = report.get("nvidia_smi") or {}
    engine_mib = _num(smi.get("engine_vram_used_mib"))
    if engine_mib is None and _num(placement.get("vram_used")) is not None:
        engine_mib = float(placement["vram_used"]) / 2**20
    after_load, after_runs = _num(smi.get("after_load_mib")), _num(smi.get("after_runs_mib"))
    if engine_mib is None or after_load is None or after_load <= 0:
        missing = "the engine's readout" if engine_mib is None else "nvidia-smi's figure"
        out.append(Goal("vram", False, f"{missing} is missing (engine process {report.get('engine_pid')})"))
    else:
        ratio = engine_mib / after_load
        detail = (
            f"engine {engine_mib:.0f} MiB vs nvidia-smi {after_load:.0f} MiB after loading: {ratio:.3f} (goal within {VRAM_TOLERANCE:.0%})"
        )
        if after_runs is not None and after_runs > 0:
            detail += f"; nvidia-smi after the runs {after_runs:.0f} MiB ({engine_mib / after_runs:.3f})"
        out.append(Goal("vram", abs(ratio - 1.0) <= VRAM_TOLERANCE, detail))
    return out


def load_report(path: Path) -> dict[str, Any]:
    """The bench report in `path`; ValueError with one sentence when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path} could not be read: {exc.strerror or exc}") from exc
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON ({exc})") from exc
    if not isinstance(report, dict) or "cove" not in report:
        raise ValueError(f"{path} is not the output of cove bench --json")
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: verdict.py BENCH.json", file=sys.stderr)
        return 2
    try:
        report = load_report(Path(argv[0]))
    except ValueError as exc:
        print(f"verdict: {exc}", file=sys.stderr)
        return 2
    results = goals(report)
    for goal in results:
        print(goal.line())
    return 0 if all(g.passed for g in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
