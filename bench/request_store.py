"""What `cove serve` writes per request, in one run: the opening transaction (conversation,
streaming row, opening entry, sealed) and the closing one (finished row, closing entry, sealed),
on the store's own thread, against one sealed record entry alone (what a request cost the
record before requests were entered on acceptance). Medians over N requests.

Run: .venv/bin/python bench/request_store.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core import open_core  # noqa: E402
from app.paths import resolve_paths  # noqa: E402
from app.serve.api.request_store import RequestStore, StoreThread  # noqa: E402
from app.store.request_log import RequestLog  # noqa: E402
from tests.support.tiny_model import write_tiny_gguf  # noqa: E402


async def measure(store: RequestStore, model, n: int) -> tuple[list[float], list[float]]:
    opens, closes = [], []
    for i in range(n):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"question {i} " * 20}]
        t0 = time.perf_counter()
        opened = await store.open(
            client="bench",
            remote="127.0.0.1",
            endpoint="/v1/chat/completions",
            model=model,
            messages=messages,
            params={"max_tokens": 64},
            conversation=True,
        )
        t1 = time.perf_counter()
        await store.close(opened, reply="an answer " * 30, status="complete", metrics={"gen_tokens": 64})
        t2 = time.perf_counter()
        opens.append((t1 - t0) * 1000)
        closes.append((t2 - t1) * 1000)
    return opens, closes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        core = open_core(resolve_paths({"COVE_HOME": str(Path(tmp) / "home")}))
        model = core.library.import_file(write_tiny_gguf(Path(tmp) / "tiny.gguf"))
        thread = StoreThread(core.paths.database, core.paths.models_dir, core.paths.kv_states_dir)
        store = RequestStore(thread)
        opens, closes = asyncio.run(measure(store, model, args.n))
        thread.close()
        log = RequestLog(core.db)
        single = []
        for i in range(args.n):
            t0 = time.perf_counter()
            log.append(
                client="bench",
                remote="127.0.0.1",
                endpoint="/v1/chat/completions",
                model_name=model.name,
                model_sha256=model.sha256,
                quant=model.quant,
                params={},
                messages=[{"role": "user", "content": str(i)}],
                reply="an answer " * 30,
                status="complete",
                usage={},
                timings={},
            )
            single.append((time.perf_counter() - t0) * 1000)
        core.close()
    med = statistics.median
    print(
        f"per request, median of {args.n}: open {med(opens):.2f} ms, close {med(closes):.2f} ms, "
        f"together {med([a + b for a, b in zip(opens, closes)]):.2f} ms; one sealed entry alone {med(single):.2f} ms"
    )


if __name__ == "__main__":
    main()
