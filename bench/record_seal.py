"""What sealing the record costs (app/store/record_seals.py): N entries appended one transaction
each, as Cove writes them, sealed (each seal evolves the key and rewrites the sealing state) and,
in the same run, N appended with sealing off; then `verify` with this machine's key and with the
verification key. The sealing state is kept in the file beside the database (as on a machine
without a secure keyring); an OS keyring costs what one keyring write costs, per entry.

Usage: .venv/bin/python bench/record_seal.py [--entries 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")  # the file store, not a real keyring

from app.core import open_core  # noqa: E402
from app.paths import resolve_paths  # noqa: E402
from app.store import record_seals  # noqa: E402
from app.store.request_log import RequestLog  # noqa: E402


def _append(log: RequestLog, i: int) -> None:
    log.append(
        client="bench",
        remote="127.0.0.1",
        endpoint="/v1/chat/completions",
        model_name="tiny",
        model_sha256="ab" * 32,
        quant="Q4_K_M",
        params={"temperature": 0.7, "seed": i},
        messages=[{"role": "user", "content": f"question number {i}, about lighthouses"}],
        reply=f"answer number {i}: a tower with a light",
        status="complete",
        usage={"prompt_tokens": 12, "completion_tokens": 9},
        timings={"ttft_ms": 40.0},
    )


def _fill(home: Path, n: int, sealed: bool) -> tuple[float, RequestLog]:
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    log = RequestLog(core.db)
    original = (record_seals.Sealer.prepare, record_seals.Sealer.seal)
    if not sealed:  # the same appends, with the seal and the key's evolution left out
        record_seals.Sealer.prepare = lambda self: None  # type: ignore[method-assign,assignment,return-value]
        record_seals.Sealer.seal = lambda self, state, seq, head: None  # type: ignore[method-assign,assignment]
    try:
        start = time.perf_counter()
        for i in range(n):
            _append(log, i)
        return time.perf_counter() - start, log
    finally:
        record_seals.Sealer.prepare, record_seals.Sealer.seal = original  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = args.entries
    with tempfile.TemporaryDirectory(prefix="cove-seal-bench-") as tmp:
        plain_s, _ = _fill(Path(tmp) / "plain", n, sealed=False)
        sealed_s, log = _fill(Path(tmp) / "sealed", n, sealed=True)
        start = time.perf_counter()
        local = log.verify()
        local_s = time.perf_counter() - start
        state = log.keys.load()
        assert state is not None and state.verification is not None
        start = time.perf_counter()
        full = log.verify((state.key_id, bytes.fromhex(state.verification)))
        full_s = time.perf_counter() - start
    figures = {
        "entries": n,
        "append_plain_s": round(plain_s, 2),
        "append_sealed_s": round(sealed_s, 2),
        "sealed_over_plain": round(sealed_s / plain_s, 3),
        "seal_ms_per_entry": round(1000 * (sealed_s - plain_s) / n, 3),
        "verify_local_s": round(local_s, 2),
        "verify_with_key_s": round(full_s, 2),
        "intact": local.intact and full.intact,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{n:,} entries, one transaction each: {plain_s:.1f} s unsealed, {sealed_s:.1f} s sealed "
            f"({figures['sealed_over_plain']}x; {figures['seal_ms_per_entry']} ms more per entry)"
        )
        print(
            f"verify: {local_s:.2f} s with this machine's key, {full_s:.2f} s with the verification key "
            f"({'intact' if figures['intact'] else 'NOT INTACT'})"
        )
    return 0 if figures["intact"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
