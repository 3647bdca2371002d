"""The memory estimate with slots against what llama.cpp really allocates.

For a model (default: the starter) at each context, with 1 and 4 slots: open it with llama.cpp's
non-unified KV cache (n_seq_max = slots, kv_unified off, n_ctx = context x slots, as Cove's engine
holds its slots) and read the KV cache and compute buffer sizes from llama.cpp's buffer report;
beside them, models.memory_estimate's `kv_ram` and `compute_ram` for the same slots.
Ratio = measured / estimated; goal: within 0.90-1.10.

The context is opened with n_outputs_max = slots: each decode step asks for at most one logits
row per slot, and llama.cpp would otherwise reserve (but never touch) n_ubatch rows of logits in
the compute buffer (docs/decisions/memory-estimates.md).

Run: .venv/bin/python bench/slots_memory.py [MODEL.gguf] [--ctx 2048,8192] [--slots 1,4] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.context_size import batch_size  # noqa: E402
from models.gguf_validate import read_gguf_header  # noqa: E402
from models.memory_estimate import compute_parts  # noqa: E402
from models.model_facts import facts_from_header  # noqa: E402

MiB = 1 << 20


@dataclass(frozen=True)
class SlotMemory:
    """One model at one context with `slots` slots: llama.cpp's buffers and the estimate's."""

    n_ctx: int  # one slot's context
    slots: int
    kv_bytes: int
    compute_bytes: int
    kv_estimate: int
    compute_estimate: int

    @property
    def ratio(self) -> float:
        """Measured / estimated, KV cache and compute buffer together."""
        return (self.kv_bytes + self.compute_bytes) / (self.kv_estimate + self.compute_estimate)


@contextmanager
def _slot_context(slots: int) -> Iterator[None]:
    """While it runs, a Llama() made gets `slots` sequences in a non-unified KV cache and
    llama.cpp's automatic flash attention, as Cove's engine asks for."""
    import llama_cpp
    from llama_cpp import _internals as llama_internals

    base = llama_internals.LlamaContext

    class _Context(base):  # type: ignore[misc, valid-type]
        def __init__(self, *, model, params, verbose: bool = True) -> None:  # type: ignore[no-untyped-def]
            params.n_seq_max = slots
            params.kv_unified = False
            params.n_outputs_max = slots
            params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO  # Cove's "auto"
            super().__init__(model=model, params=params, verbose=verbose)

    llama_internals.LlamaContext = _Context  # type: ignore[misc]
    try:
        yield
    finally:
        llama_internals.LlamaContext = base  # type: ignore[misc]


def measure(path: Path, n_ctx: int, slots: int) -> SlotMemory:
    """Open `path` with `slots` slots of `n_ctx` tokens (flash attention auto, f16 cache, the
    CPU) and compare llama.cpp's buffers with the estimate."""
    import llama_cpp

    from app.engine.host.llama_log import llama_buffer_report

    with _slot_context(slots), llama_buffer_report() as report:
        llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx * slots,
            n_batch=batch_size(n_ctx),
            n_ubatch=batch_size(n_ctx),
            n_threads=1,
            n_gpu_layers=0,
            verbose=False,
        )
    try:
        assert int(llama_cpp.llama_n_seq_max(llm.ctx)) == slots
        assert int(llama_cpp.llama_n_ctx_seq(llm.ctx)) == n_ctx
    finally:
        llm.close()
    est = compute_parts(facts_from_header(read_gguf_header(path)), None, n_ctx, 0, "f16", slots=slots)
    return SlotMemory(n_ctx, slots, report.kv_bytes, report.compute_bytes, est.kv_ram, est.compute_ram)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="a .gguf file (default: the starter model)")
    parser.add_argument("--ctx", default="2048,8192", help="contexts a slot, comma-separated")
    parser.add_argument("--slots", default="1,4", help="slot counts, comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.model:
        path = Path(args.model)
    else:
        from starter_file import default_model

        path = Path(default_model())
    rows = [measure(path, int(c), int(s)) for c in args.ctx.split(",") for s in args.slots.split(",")]
    if args.json:
        print(json.dumps({"model": path.name, "rows": [{**asdict(r), "ratio": r.ratio} for r in rows]}, indent=2))
        return 0
    print(f"{path.name}: llama.cpp's buffers (measured) vs the estimate, MiB")
    print(f"{'ctx':>6} {'slots':>5} {'KV':>9} {'est':>9} {'compute':>9} {'est':>9} {'ratio':>6}")
    for r in rows:
        print(
            f"{r.n_ctx:>6} {r.slots:>5} {r.kv_bytes / MiB:>9.1f} {r.kv_estimate / MiB:>9.1f} "
            f"{r.compute_bytes / MiB:>9.1f} {r.compute_estimate / MiB:>9.1f} {r.ratio:>6.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
