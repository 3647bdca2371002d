"""The paired case of bench/remote.py (issue 52): a reply through a paired Cove over TLS against
the serving Cove's own clocks for the very same request, and the time to pair.

Two Coves on this machine, each with a home of its own:
  serving (A)  bench/remote.py's home with the model imported and a `cove serve keys add` key (for
               the plain-httpx baseline), then `cove serve --host 127.0.0.2 --port P`: HTTPS
               with its machine certificate (app/serve/http/tls.py).
  client (B)   a second COVE_HOME opened in this process, its keys in a file-backed keyring in
               that home (tests/support/keyrings.py FileKeyring), so the OS keyring is never
               touched.
`cove serve pair` in A makes a code (once per pairing; the other machine's part, not timed), and B
pairs with it through app.remote.pairing.pair, called in this process as `cove remote pair` calls
it, under the names bench-1, bench-2, ...:
  time to pair    the wall time of that call: the TLS handshake, the certificate checked against
                  the code, POST /cove/pair, A making the key, the certificate pinned, the key put
                  into B's keyring and the connection saved. Not in it: the interpreter start and
                  imports of a `cove remote pair` command, nor the listing of the models that
                  command does next, timed beside it (`then lists its models`: one probe over the
                  pinned certificate, with the key).
Medians of `--pairings` pairings (default 3).

Then the requests of the cove serve case (bench/remote.py: same prompts, seeds and sampling), through
a RemoteEngine on the connection bench-1 as B stands after pairing (Core.remote_engine's
way: the connection, its pinned certificate, its key from B's keyring), each against the timings
A streams for it: tg ratio = B's gen_tps / A's timings.tokens_per_second, TTFT over = B's time to
first token - A's timings.ttft_ms. Plain httpx over the same TLS (pinned certificate, key, one
kept-alive connection) beside it. One warm-up request (A loads its engine), then `--rounds` of
`--requests`; each round's medians and the medians over the rounds.

Run: .venv/bin/python bench/remote.py --cases paired [--rounds 3] [--requests 5] [--pairings 3] [--json]
(the default --cases runs it after the llama-server and cove serve cases).
Goals: tg ratio >= 0.98; TTFT over <= 15 ms p50 on loopback.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core import open_core
from app.paths import resolve_paths
from app.remote.connections import Connections
from app.remote.engine import RemoteEngine
from app.remote.keys import ConnectionKeys
from app.remote.pairing import pair
from app.remote.probe import probe
from app.remote.remote_model import RemoteModel
from bench.remote import GOAL_TG_RATIO, ROOT, batch, case_line, log_round, one_request, summary
from models.network import NetworkGate

HOST = "127.0.0.2"
GOAL_TTFT_OVER_MS = 15.0
PAIRINGS = 3
MACHINE_NAME = "cove-bench"  # what A calls B's keys: paired-cove-bench, -2, -3
TIMED = (
    "app.remote.pairing.pair in process (TLS handshake, certificate checked against the code, POST /cove/pair, "
    "key made there, certificate pinned, key into the keyring, connection saved); not the code's making, nor "
    "a `cove remote pair` command's start"
)


def cove(env: dict[str, str], *args: str) -> str:
    """A `cove` command in `env`'s home; its standard output."""
    done = subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"cove {' '.join(args[:3])} failed: {done.stderr.strip()[-1500:]}")
    return done.stdout


@contextmanager
def serving_tls(env: dict[str, str], log_file: Path) -> Iterator[tuple[str, int]]:
    """`cove serve --host 127.0.0.2` of `env`'s home on a free port: (https://HOST:PORT, PORT)
    once it has said its address, stopped after the block."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    url = f"https://{HOST}:{port}"
    with log_file.open("wb") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "serve", "--host", HOST, "--port", str(port)], cwd=ROOT, env=env, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 120
        while f"{url}/v1" not in log_file.read_text(errors="replace"):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"cove serve --host {HOST} did not start: {log_file.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield url, port
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextmanager
def client_home() -> Iterator[Connections]:
    """The second Cove: a home of its own, opened here; its connections with their keys in a
    file-backed keyring in that home."""
    from tests.support.keyrings import FileKeyring

    home = Path(tempfile.mkdtemp(prefix="cove-remote-bench-client-"))
    os.environ["COVE_TEST_KEYRING_FILE"] = str(home / "keyring.json")  # where FileKeyring keeps the keys
    core = open_core(resolve_paths({"COVE_HOME": str(home / "cove")}))
    try:
        yield Connections(core.db, ConnectionKeys(FileKeyring()))
    finally:
        core.close()
        shutil.rmtree(home, ignore_errors=True)


def pair_once(env: dict[str, str], port: int, url: str, connections: Connections, gate: NetworkGate, name: str) -> dict[str, Any]:
    """Make a code in A, pair B with it as `name`, then list A's models as `cove remote pair` does."""
    code = cove(env, "serve", "pair", "--host", HOST, "--port", str(port)).strip()
    started = time.perf_counter()
    paired = pair(connections, gate, name, url, code, machine_name=MACHINE_NAME)
    paired_at = time.perf_counter()
    info = probe(paired.connection, connections.key(name), gate)
    listed_at = time.perf_counter()
    if paired.notice is not None:
        raise RuntimeError(f"the key was not kept in the keyring: {paired.notice}")
    if not connections.is_pinned(paired.connection) or connections.keys.get(name) is None:
        raise RuntimeError(f"{name} was paired without a pinned certificate or a key in the keyring")
    connections.record_probe(name, info)
    return {
        "name": name,
        "key_name": paired.key_name,
        "pair_ms": (paired_at - started) * 1000,
        "list_models_ms": (listed_at - paired_at) * 1000,
        "kind": info.kind,
        "models": [str(m["id"]) for m in info.models],
    }


def run_paired(env: dict[str, str], cove_model: str, rounds: int, requests: int, log: Any, pairings: int = PAIRINGS) -> dict[str, Any]:
    home = Path(env["COVE_HOME"])
    cove(env, "serve", "keys", "add", "bench")  # its key is never used: pairing makes B's own
    gate = NetworkGate()
    with serving_tls(env, home / "serve-paired.log") as (url, port), client_home() as connections:
        log(f"cove serve on {url}/v1 (HTTPS); pairing a second Cove with it {pairings} times")
        pairs = [pair_once(env, port, url, connections, gate, f"bench-{i + 1}") for i in range(max(1, pairings))]
        first = pairs[0]
        if cove_model not in first["models"]:
            raise RuntimeError(f"the paired Cove lists {first['models']}, not {cove_model}")
        log("time to pair: " + ", ".join(f"{p['pair_ms']:.1f}" for p in pairs) + " ms")
        # The engine as Core.remote_engine makes it: the connection as stored, its key from the keyring.
        connection = connections.get(first["name"])
        engine = RemoteEngine(connection, connections.key(connection.name), gate)
        model = RemoteModel(connection=connection.name, model_id=cove_model, host=connection.host, kind=first["kind"])
        pinned = connections.is_pinned(connection)
        per_round: dict[str, list[dict[str, Any]]] = {"paired": []}
        try:
            one_request(engine, model, 0)  # warm-up: A loads its engine, B's connection is opened
            for r in range(rounds):
                seeds = range(1 + r * requests, 1 + (r + 1) * requests)
                per_round["paired"].append(batch(engine, model, seeds))
                log_round(r, rounds, per_round, log)
        finally:
            engine.close()
    return {
        **summary(per_round["paired"], first["kind"]),
        "url": f"{url}/v1",
        "tls": connection.tls,
        "pinned": pinned,
        "goals": {"tg_ratio": GOAL_TG_RATIO, "ttft_over_ms_p50": GOAL_TTFT_OVER_MS},
        "pair_ms": statistics.median(p["pair_ms"] for p in pairs),
        "list_models_ms": statistics.median(p["list_models_ms"] for p in pairs),
        "pairing_timed": TIMED,
        "pairings": pairs,
    }


def describe_paired(s: dict[str, Any]) -> list[str]:
    each = ", ".join(f"{p['pair_ms']:.1f}" for p in s["pairings"])
    return [
        case_line(s, "paired Cove over TLS", "the serving Cove's own timings", GOAL_TTFT_OVER_MS),
        f"time to pair: {s['pair_ms']:.1f} ms (median of {len(s['pairings'])}: {each}), then lists its models in "
        f"{s['list_models_ms']:.1f} ms; timed: {s['pairing_timed']}",
    ]
