"""A good client's latency while `cove serve` is flooded: 20,000 connections that never send a
request and 50 that trickle their headers or body a byte at a time, held by two helper
processes (one process may hold too few files), while a client asks GET /v1/models on a new
connection every 0.2 s. Prints the good client's p50/max latency and failures, and the size of
the server's log. `--root DIR` runs another checkout's Cove (e.g. the code before a change,
unpacked with `git archive`) with this one's tiny model and client.

    .venv/bin/python bench/connection_flood.py [--idle 20000] [--trickle 50] [--seconds 30] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HELPER = r"""
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, idle, trickle = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
held, failed = [], 0
for _ in range(idle):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        failed += 1
slow = []
for i in range(trickle):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:  # headers done, the body never ends
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n{")
        else:  # headers that never end
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(s)
    except OSError:
        failed += 1
print(f"{len(held)} {len(slow)} {failed}", flush=True)
while True:  # trickle one byte a second per connection, reopening the trickles the server closed
    time.sleep(1)
    for i, s in enumerate(slow):
        try:
            s.sendall(b"x" if i % 2 == 0 else b" ")
        except OSError:
            try:
                slow[i] = socket.create_connection(("127.0.0.1", port), timeout=5)
                slow[i].sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            except OSError:
                pass
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=20_000)
    parser.add_argument("--trickle", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose cove serve runs")
    args = parser.parse_args()
    from tests.support.tiny_model import write_tiny_gguf

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {**os.environ, "COVE_HOME": str(home / "cove"), "HOME": str(home), "PYTHONPATH": str(args.root)}
        cli = [sys.executable, "-m", "app.cli.main"]
        model = write_tiny_gguf(home / "tiny.gguf")
        subprocess.run([*cli, "models", "import", str(model)], cwd=args.root, env=env, check=True, capture_output=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = home / "serve.log"
        with log.open("wb") as err:
            server = subprocess.Popen([*cli, "serve", "--port", str(port)], cwd=args.root, env=env, stderr=err, start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1/models"
        for _ in range(300):
            try:
                httpx.get(url, timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        helpers = []
        try:
            parts = 2
            for i in range(parts):
                helpers.append(
                    subprocess.Popen(
                        [sys.executable, "-c", HELPER, str(port), str(args.idle // parts), str(args.trickle if i == 0 else 0)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            latencies: list[float] = []
            failures: list[str] = []
            started = time.monotonic()
            while time.monotonic() - started < args.seconds:
                t0 = time.perf_counter()
                try:
                    httpx.get(url, timeout=10, headers={"connection": "close"}).raise_for_status()
                    latencies.append(time.perf_counter() - t0)
                except httpx.HTTPError as exc:
                    failures.append(type(exc).__name__)
                time.sleep(max(0.0, 0.2 - (time.perf_counter() - t0)))
            alive = server.poll() is None
        finally:
            for h in helpers:
                h.kill()
            for h in helpers:
                out = h.communicate()[0].strip()
                if out:
                    print(f"flood helper: opened, trickling, failed to open = {out}")
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
        text = log.read_text(errors="replace")
        ms = sorted(x * 1000 for x in latencies)
        result = {
            "root": str(args.root),
            "idle": args.idle,
            "trickle": args.trickle,
            "seconds": args.seconds,
            "good_requests": len(ms) + len(failures),
            "good_failures": len(failures),
            "good_p50_ms": round(statistics.median(ms), 1) if ms else None,
            "good_max_ms": round(ms[-1], 1) if ms else None,
            "server_alive": alive,
            "log_bytes": len(text.encode()),
            "log_tracebacks": text.count("Traceback"),
        }
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
