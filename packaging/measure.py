"""Measures the build: its size on disk (with the biggest parts) and the time from launch to the
window's first paint, for the frozen app and the venv's `cove`, runs alternating.

    .venv/bin/python packaging/measure.py                 # dist/Cove/cove vs .venv/bin/cove, 5 runs each
    .venv/bin/python packaging/measure.py --runs 9 --json
    .venv/bin/python packaging/measure.py --dist D1 --compare-dist D2   # two builds (e.g. with and without Vulkan)

Start-up is what `cove` prints with COVE_REPORT_STARTUP=1 (ui/main.py): the time from the
process's start, as the kernel recorded it, to the first paint of the window. Each variant
has its own COVE_HOME holding one imported model (a tiny GGUF the script writes), as a
returning user's would: so the venv's first start does not assemble the starter model in the
background, which the build (without the starter) would not. Each variant gets one warm-up
run first, so every measured run starts from the same warm page cache. The window is offscreen
(QT_QPA_PLATFORM=offscreen) unless --platform says otherwise. Medians, never single runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = re.compile(r"cove: window shown (\d+) ms after the process started")


def tree_size(path: Path) -> int:
    """Bytes of the files under `path` (symlinks count as links, as `du -sb` counts them)."""
    total = path.lstat().st_size if path.is_symlink() or path.is_file() else 0
    if path.is_dir() and not path.is_symlink():
        for child in path.rglob("*"):
            total += child.lstat().st_size
    return total


def biggest(folder: Path, n: int) -> list[tuple[str, int]]:
    parts = [(str(p.relative_to(folder.parent)), tree_size(p)) for p in folder.iterdir()]
    return sorted(parts, key=lambda item: -item[1])[:n]


def startup_ms(command: list[str], home: Path, platform: str) -> int:
    env = {
        **os.environ,
        "COVE_HOME": str(home),
        "QT_QPA_PLATFORM": platform,
        "COVE_QUIT_AFTER_MS": "300",
        "COVE_REPORT_STARTUP": "1",
    }
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    found = SHOWN.search(result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"measure: {' '.join(command)} exited {result.returncode} without a start-up figure:\n{result.stderr[-1500:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist" / "Cove", help="the build folder (default dist/Cove)")
    parser.add_argument("--venv-cove", type=Path, default=ROOT / ".venv" / "bin" / "cove", help="the non-frozen cove")
    parser.add_argument("--compare-dist", type=Path, help="another build folder, run instead of the venv's cove")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--platform", default="offscreen", help="QT_QPA_PLATFORM for the runs (default offscreen)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    frozen = args.dist / "cove"
    if not frozen.is_file():
        raise SystemExit(f"measure: no build at {frozen}; run packaging/build.sh first")
    other = "venv" if args.compare_dist is None else "other"
    variants = {"frozen": [str(frozen)], other: [str(args.venv_cove if args.compare_dist is None else args.compare_dist / "cove")]}
    times: dict[str, list[int]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="cove-measure-") as tmp:
        homes = {name: Path(tmp) / name for name in variants}
        model = Path(tmp) / "tiny.gguf"
        sys.path.insert(0, str(ROOT))
        from tests.support.tiny_model import write_tiny_gguf

        write_tiny_gguf(model)
        for name, command in variants.items():
            imported = subprocess.run(
                [*command, "models", "import", str(model)],
                capture_output=True,
                text=True,
                env={**os.environ, "COVE_HOME": str(homes[name])},
                timeout=120,
            )
            if imported.returncode != 0:
                raise SystemExit(f"measure: importing the tiny model with {name} failed: {imported.stderr.strip()}")
            startup_ms(command, homes[name], args.platform)  # warm-up, not counted
        for _ in range(args.runs):
            for name, command in variants.items():
                times[name].append(startup_ms(command, homes[name], args.platform))

    report = {
        "dist": str(args.dist),
        "size_bytes": tree_size(args.dist),
        "biggest": biggest(args.dist / "_internal", 12),
        "qt_libs": biggest(args.dist / "_internal" / "PySide6" / "Qt" / "lib", 6),
        "startup_ms": {name: {"median": statistics.median(v), "runs": v} for name, v in times.items()},
        "platform": args.platform,
    }
    if args.compare_dist is not None:
        report["other_dist"] = str(args.compare_dist)
        report["other_size_bytes"] = tree_size(args.compare_dist)
    ratio_key = f"startup_ratio_frozen_to_{other}"
    report[ratio_key] = round(report["startup_ms"]["frozen"]["median"] / report["startup_ms"][other]["median"], 3)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    mb = 1024 * 1024
    print(f"size of {args.dist}: {report['size_bytes'] / mb:.1f} MiB ({report['size_bytes']} bytes)")
    for name, size in report["biggest"]:
        print(f"  {size / mb:7.1f} MiB  {name}")
    print("  of which Qt libraries:")
    for name, size in report["qt_libs"]:
        print(f"  {size / mb:7.1f} MiB  {name}")
    print(f"launch to window shown ({args.platform}, median of {args.runs} warm runs, alternating):")
    for name, data in report["startup_ms"].items():
        print(f"  {name:7s} {data['median']:6.0f} ms   runs {data['runs']}")
    if args.compare_dist is not None:
        print(f"size of {args.compare_dist}: {report['other_size_bytes'] / mb:.1f} MiB ({report['other_size_bytes']} bytes)")
    print(f"  frozen / {other}: {report[ratio_key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
