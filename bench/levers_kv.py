"""The KV cache type lever on the starter at a context of 8192: f16 against q8_0 (K and V both).

For each type, through the engine client Cove uses: the KV buffers llama.cpp reports
(LoadedModel.kv_bytes) against the memory estimate's KV part (models/memory_estimate.py) and
their ratio, the estimate's totals beside the engine's private memory after a long prompt, the
prompt speed on a ~2,000-token prompt and the generation speed over 128 tokens (metrics prompt_tps
and gen_tps; no cache reuse, EOS ignored, drafting off so only the cache type differs). Each round
loads and measures both types, f16 first in even rounds and q8_0 first in odd ones, so a machine
whose load drifts weighs on both; the figures are medians of the rounds.

Run: .venv/bin/python bench/levers_kv.py [--model PATH] [--rounds 3] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.client import EngineClient  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from app.speed.runner import random_prompt, vocab_info  # noqa: E402
from models.gguf_validate import read_gguf_header  # noqa: E402
from models.memory_estimate import compute_parts  # noqa: E402
from models.model_facts import facts_from_header  # noqa: E402

N_CTX = 8192
TYPES = ("f16", "q8_0")
N_PROMPT, N_GEN, N_GEN_PROMPT = 2000, 128, 16
QUICK_PROMPT, QUICK_GEN = 256, 16


def starter_path() -> str:
    """The starter model's file, assembled into a scratch Cove home if needed."""
    os.environ.setdefault("COVE_HOME", tempfile.mkdtemp(prefix="cove-levers-kv-"))
    from app.core import open_core
    from models.starter import ensure_starter

    core = open_core()
    try:
        return str(ensure_starter(core.library).path)
    finally:
        core.close()


def _reply(client: EngineClient, prompt: list[int], max_tokens: int) -> dict[str, Any]:
    fin = client.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=max_tokens, temperature=0.0),
            prompt_tokens=prompt,
            ignore_eos=True,
            no_cache=True,
            speculative="off",
        )
    ).wait()
    if fin.error:
        raise RuntimeError(f"the engine failed during the benchmark: {fin.error}")
    if fin.metrics.get("cached_tokens"):
        raise RuntimeError("the engine reused its cache during the benchmark; the figures would be wrong")
    return dict(fin.metrics)


def _estimate(model_path: str, kv_type: str) -> dict[str, int]:
    facts = facts_from_header(read_gguf_header(model_path))
    e = compute_parts(facts, os.path.getsize(model_path), N_CTX, 0, kv_type, type_v=kv_type, flash_attn=True)
    return {"kv_bytes": e.kv_ram + e.kv_vram, "total_ram": e.total_ram, "loaded_ram": e.loaded_ram}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def run(model_path: str, rounds: int = 3, quick: bool = False) -> dict[str, Any]:
    """Both cache types, `rounds` times each (alternating which goes first); medians and ratios.
    `quick`: one short check that the bench runs (a 256-token prompt, 16 tokens generated)."""
    n_prompt, n_gen = (QUICK_PROMPT, QUICK_GEN) if quick else (N_PROMPT, N_GEN)
    n_vocab, bos = vocab_info(model_path)
    rng = random.Random(1234)
    long_prompt = random_prompt(rng, n_vocab, bos, n_prompt)
    short_prompt = random_prompt(rng, n_vocab, bos, N_GEN_PROMPT)
    samples: dict[str, dict[str, list[float]]] = {t: {"pp": [], "tg": [], "kv": [], "uss": []} for t in TYPES}
    flash: dict[str, str] = {}
    with EngineClient() as client:
        for r in range(max(1, rounds)):
            for kv_type in TYPES if r % 2 == 0 else tuple(reversed(TYPES)):
                loaded = client.load(model_path, n_ctx=N_CTX, type_k=kv_type, type_v=kv_type)
                flash[kv_type] = loaded.flash_attn
                pp = _reply(client, long_prompt, 1)
                tg = _reply(client, short_prompt, n_gen)
                s = samples[kv_type]
                s["kv"].append(loaded.kv_bytes)
                s["pp"].append(float(pp["prompt_tps"]))
                s["tg"].append(float(tg["gen_tps"]))
                if isinstance(pp.get("engine_uss_bytes"), int):
                    s["uss"].append(pp["engine_uss_bytes"])
    types: dict[str, Any] = {}
    for kv_type in TYPES:
        s, est = samples[kv_type], _estimate(model_path, kv_type)
        kv, uss = _median(s["kv"]), _median(s["uss"])
        types[kv_type] = {
            "flash_attn": flash.get(kv_type),
            "kv_bytes": kv,
            "kv_estimate": est["kv_bytes"],
            "kv_measured_over_estimate": _ratio(kv, est["kv_bytes"]),
            "estimate_total_ram": est["total_ram"],
            "estimate_loaded_ram": est["loaded_ram"],
            "engine_uss": uss,
            "uss_over_estimate_total": _ratio(uss, est["total_ram"]),
            "pp_tps": _median(s["pp"]),
            "tg_tps": _median(s["tg"]),
            "pp_samples": s["pp"],
            "tg_samples": s["tg"],
        }
    f16, q8 = types["f16"], types["q8_0"]
    return {
        "model": Path(model_path).name,
        "n_ctx": N_CTX,
        "rounds": max(1, rounds),
        "quick": quick,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "types": types,
        "q8_0_over_f16": {
            "kv_bytes": _ratio(q8["kv_bytes"], f16["kv_bytes"]),
            "pp": _ratio(q8["pp_tps"], f16["pp_tps"]),
            "tg": _ratio(q8["tg_tps"], f16["tg_tps"]),
        },
    }


def _print(result: dict[str, Any]) -> None:
    def mib(n: float | None) -> str:
        return "?" if n is None else f"{n / 2**20:,.1f} MiB"

    print(
        f"{result['model']} at n_ctx {result['n_ctx']}: pp on {result['n_prompt']} tokens, tg over "
        f"{result['n_gen']}, medians of {result['rounds']} round(s){' (quick)' if result['quick'] else ''}"
    )
    print(
        f"{'type':<6}{'KV measured':>14}{'KV estimate':>14}{'ratio':>8}{'pp tok/s':>10}{'tg tok/s':>10}{'engine USS':>14}{'est. total':>14}"
    )
    for kv_type, t in result["types"].items():
        print(
            f"{kv_type:<6}{mib(t['kv_bytes']):>14}{mib(t['kv_estimate']):>14}{t['kv_measured_over_estimate'] or 0:>8.3f}"
            f"{t['pp_tps'] or 0:>10.1f}{t['tg_tps'] or 0:>10.1f}{mib(t['engine_uss']):>14}"
            f"{mib(t['estimate_total_ram']):>14}"
        )
    r = result["q8_0_over_f16"]
    print(f"q8_0 / f16: KV {r['kv_bytes']}, pp {r['pp']}, tg {r['tg']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the starter)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one short round: a check that the bench runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.model or starter_path(), rounds=1 if args.quick else args.rounds, quick=args.quick)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
