"""How long the light `cove` commands take to start and finish: wall time per command, each run a
fresh process, as a person runs them.

The commands: `cove --version`, `cove history list` (a home with a few conversations) and
`cove docs search` (a small keyword-only collection), each through `python -m app.cli.main` and,
where the venv has it, through the `cove` console script (ui/main.py, which hands any arguments to
the command line). `python -c pass` is the floor: the interpreter's own start with this venv's
site-packages. Every figure is the median of --runs runs after one unmeasured warm-up run (the
.pyc files written, the files in the page cache); min and max are shown beside it.
Goal: each command <= 0.25 s.

The home lives in a temporary folder made for the run and is removed after it.

Run: .venv/bin/python bench/startup.py [--runs 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.25

DOCUMENTS = {
    "lighthouse.md": "# Harrow Point\n\nThe keeper counted 417 gulls before the storm reached the lighthouse.\n",
    "kettle.txt": "The kettle's warranty lasts seven years from the day it was bought.\n",
    "garden.md": "# Garden\n\nTomatoes want sun, water in the morning and a stake once they flower.\n",
}


def make_home(folder: Path) -> Path:
    """A home with a few saved conversations and a keyword-only collection named bench."""
    home = folder / "home"
    papers = folder / "papers"
    papers.mkdir(parents=True)
    for name, text in DOCUMENTS.items():
        (papers / name).write_text(text, encoding="utf-8")
    fill = (
        "import sys\n"
        "from app.core import open_core\n"
        "core = open_core()\n"
        "for i in range(8):\n"
        "    conversation = core.history.create_conversation(model='bench')\n"
        "    core.history.add_user_message(conversation.id, f'question {i} about the lighthouse')\n"
        "core.close()\n"
    )
    subprocess.run([sys.executable, "-c", fill], cwd=ROOT, env=_env(home), check=True)
    subprocess.run(
        [sys.executable, "-m", "app.cli.main", "docs", "add", "bench", str(papers), "--no-embed"],
        cwd=ROOT,
        env=_env(home),
        check=True,
        capture_output=True,
    )
    return home


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)}


def commands() -> list[tuple[str, list[str]]]:
    """(label, argv) of each measured command; the console script only where the venv has one."""
    module = [sys.executable, "-m", "app.cli.main"]
    found: list[tuple[str, list[str]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("-m app.cli.main --version", [*module, "--version"]),
        ("-m app.cli.main history list", [*module, "history", "list"]),
        ("-m app.cli.main docs search", [*module, "docs", "search", "bench", "how many gulls"]),
    ]
    script = Path(sys.executable).parent / "cove"
    if script.exists():
        found += [
            ("cove --version", [str(script), "--version"]),
            ("cove history list", [str(script), "history", "list"]),
            ("cove docs search", [str(script), "docs", "search", "bench", "how many gulls"]),
        ]
    return found


def time_command(argv: list[str], home: Path, runs: int) -> list[float]:
    env = _env(home)
    subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)  # warm-up, not measured
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
    return walls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="cove-startup-"))
    try:
        home = make_home(folder)
        rows = []
        for label, argv in commands():
            walls = time_command(argv, home, args.runs)
            rows.append(
                {
                    "command": label,
                    "median_s": round(statistics.median(walls), 4),
                    "min_s": round(min(walls), 4),
                    "max_s": round(max(walls), 4),
                    "runs": len(walls),
                }
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if args.json:
        print(json.dumps({"goal_s": GOAL_S, "load_1min": load, "cores": os.cpu_count(), "commands": rows}, indent=2))
        return 0
    print(
        f"cove start-up: wall per command, median of {args.runs} runs (load {load:.2f} on {os.cpu_count()} cores)"
        if load is not None
        else f"cove start-up: wall per command, median of {args.runs} runs"
    )
    print(f"{'command':<32} {'median':>8} {'min':>8} {'max':>8}")
    for row in rows:
        mark = "" if row["command"] == "python -c pass" or row["median_s"] <= GOAL_S else f"  over {GOAL_S} s"
        print(f"{row['command']:<32} {row['median_s']:>7.3f}s {row['min_s']:>7.3f}s {row['max_s']:>7.3f}s{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
