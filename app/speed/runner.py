"""Measure prompt processing and generation speed through Cove's engine host, shaped like
llama-bench's pp and tg tests so the two can be divided.

Cove's side goes through the real engine path a chat uses (pipe to the host, tokenize-free
`prompt_tokens`, the chat's sampler chain, incremental detokenization, streaming):
  pp: N random ids with no_cache=True and max_tokens=1 -> N / the engine's prefill_ms
      (its prompt_tps; that span also holds one sampler call).
  tg: a 1-token prompt (BOS) with no_cache=True, ignore_eos=True, max_tokens=N; the rate
      is N tokens over the time from the start of that 1-token decode to the N-th token,
      i.e. N decode+sample steps, the same count of decodes llama-bench times.
What llama-bench's own tests do, and so why these shapes: docs/decisions/benchmarks.md, "`cove bench`".
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.request import ReplyRequest, Sampling
from app.settings import SamplingParams
from models.gguf_validate import GGUFArray, read_gguf_header


def vocab_info(model_path: Path | str) -> tuple[int, int | None]:
    """(n_vocab, bos id or None when the model does not add BOS), from the GGUF header."""
    meta = read_gguf_header(model_path).metadata
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, GGUFArray) or tokens.length == 0:
        raise ValueError(f"{Path(model_path).name} has no tokenizer vocabulary")
    bos = meta.get("tokenizer.ggml.bos_token_id")
    add_bos = meta.get("tokenizer.ggml.add_bos_token", True)
    return tokens.length, (int(bos) if isinstance(bos, int) and add_bos else None)


def random_prompt(rng: random.Random, n_vocab: int, bos: int | None, n: int) -> list[int]:
    """n token ids like llama-bench's test_prompt: BOS first when the model adds one, then uniform ids."""
    ids = [rng.randrange(n_vocab) for _ in range(n)]
    if bos is not None and ids:
        ids[0] = bos
    return ids


def run_cove_bench(
    client: Any,
    model_path: Path | str,
    *,
    threads: int,
    reps: int = 5,
    n_prompt: int = 512,
    n_gen: int = 128,
    warmup: bool = True,
    sampling: SamplingParams | None = None,
    flash_attn: bool | None = None,
    seed: int = 1234,
    log: Callable[[str], None] | None = None,
    reference_round: Callable[[int], None] | None = None,
    after_load: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Load `model_path` in the engine host and return median pp/tg tokens/s and every sample.

    Each round is one pp and one tg run plus, when given, `reference_round(i)` (bench_main
    runs one llama-bench repetition there): after Cove's runs in even rounds, before them in
    odd ones. On a shared machine whose load drifts, this keeps both sides in the same
    stretches of time and neither one always first. `after_load(loaded)`, when given, runs
    once the model is loaded and before the warmup (bench_main reads nvidia-smi there).
    """
    say = log or (lambda _msg: None)
    sp = sampling or SamplingParams()
    n_vocab, bos = vocab_info(model_path)
    rng = random.Random(seed)
    say(f"loading {Path(model_path).name} with {threads} threads")
    # n_ctx like llama-bench's (n_prompt + n_gen; the engine pads it to a multiple of 256).
    # flash_attn=None is llama.cpp's "auto", llama-bench's default; the engine reports the
    # batch sizes it chose, and bench_main passes them to llama-bench.
    loaded = client.load(str(model_path), n_ctx=n_prompt + n_gen, n_threads=threads, flash_attn=flash_attn)
    n_vocab = int(getattr(loaded, "n_vocab", 0) or n_vocab)
    if after_load is not None:
        after_load(loaded)

    def one_pp() -> dict[str, Any]:
        return _generate(client, sp, random_prompt(rng, n_vocab, bos, n_prompt), max_tokens=1)

    def one_tg() -> dict[str, Any]:
        first = bos if bos is not None else rng.randrange(n_vocab)
        return _generate(client, sp, [first], max_tokens=n_gen)

    if warmup:
        say("warmup")
        one_pp()
        one_tg()
    pp_runs: list[dict[str, Any]] = []
    tg_runs: list[dict[str, Any]] = []
    for i in range(reps):
        if reference_round is not None and i % 2 == 1:
            reference_round(i)
        say(f"cove pp{n_prompt} and tg{n_gen}, round {i + 1}/{reps}")
        pp_runs.append(one_pp())
        tg_runs.append(one_tg())
        if reference_round is not None and i % 2 == 0:
            reference_round(i)

    for m in tg_runs:
        if m.get("gen_tokens") != n_gen:
            raise RuntimeError(f"the engine generated {m.get('gen_tokens')} tokens instead of {n_gen}")
    pp_samples = [_pp_tps(m) for m in pp_runs]
    tg_samples = [_tg_tps(m) for m in tg_runs]
    return {
        "pp_tps": statistics.median(pp_samples),
        "tg_tps": statistics.median(tg_samples),
        "pp_samples_tps": pp_samples,
        "tg_samples_tps": tg_samples,
        "engine_gen_tps": statistics.median(float(m.get("gen_tps") or 0.0) for m in tg_runs),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "gen_tokens": [m.get("gen_tokens") for m in tg_runs],
        "threads": threads,
        "settings": engine_settings(loaded, threads),
        # Where the layers ran: backend, device, layers on the GPU of all, KV cache, VRAM.
        "placement": {k: v for k, v in (getattr(loaded, "placement", None) or {}).items() if k != "devices"},
        "sampling": {
            "temperature": sp.temperature,
            "top_k": sp.top_k,
            "top_p": sp.top_p,
            "min_p": sp.min_p,
            "repeat_penalty": sp.repeat_penalty,
        },
        **_perf_cross_check(pp_runs, tg_runs),
        "pp_metrics": pp_runs,
        "tg_metrics": tg_runs,
    }


def engine_settings(loaded: Any, threads: int) -> dict[str, Any]:
    """The context settings the engine ran with, named as llama-bench's JSON names them."""
    settings: dict[str, Any] = {
        "n_ctx": getattr(loaded, "n_ctx", None),
        "n_threads": getattr(loaded, "n_threads", threads),
        "n_batch": getattr(loaded, "n_batch", None) or None,
        "n_ubatch": getattr(loaded, "n_ubatch", None) or None,
        "flash_attn": getattr(loaded, "flash_attn", None),
        # The engine leaves the KV cache types at llama.cpp's default and loads with
        # llama-cpp-python's use_mmap=True (load mode "mmap"); stated so both sides pin them.
        "type_k": "f16",
        "type_v": "f16",
        "load_mode": "mmap",
        "n_gpu_layers": getattr(loaded, "n_gpu_layers", None),
        "backend": getattr(loaded, "backend", None),
        # Weights in llama.cpp's repacked (or AMX) buffers, or kept plain (app/engine/host/cpu_quirks.py).
        "repack": 1 if (getattr(loaded, "placement", None) or {}).get("extra_buffers", True) else 0,
    }
    return settings


def _generate(client: Any, sp: SamplingParams, prompt: list[int], *, max_tokens: int) -> dict[str, Any]:
    # The chat's own sampler chain (SamplingParams defaults), not greedy: its cost over the
    # vocabulary is part of what a person waits for, and llama-bench has none. No drafting:
    # llama-bench measures plain decoding.
    cpu0 = time.process_time()
    sampling = Sampling(
        max_tokens=max_tokens,
        temperature=sp.temperature,
        top_p=sp.top_p,
        top_k=sp.top_k,
        min_p=sp.min_p,
        repeat_penalty=sp.repeat_penalty,
        seed=sp.seed,
    )
    gen = client.generate(ReplyRequest(sampling=sampling, prompt_tokens=tuple(prompt), ignore_eos=True, no_cache=True, speculative="off"))
    fin = gen.wait()
    if getattr(fin, "error", None):
        raise RuntimeError(f"the engine failed during the benchmark: {fin.error}")
    metrics = dict(fin.metrics)
    # This process's CPU time while the reply ran: reading the pipe and handling each token's event.
    metrics["parent_cpu_ms"] = (time.process_time() - cpu0) * 1000.0
    if metrics.get("cached_tokens"):
        raise RuntimeError("the engine reused its cache during the benchmark; the figures would be wrong")
    return metrics


def _perf_cross_check(pp_runs: list[dict[str, Any]], tg_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """llama.cpp's own perf counters inside the engine: a cross-check, not the figure `cove bench` reports.

    A tg run is n_gen single-token decodes (the 1-token prompt and n_gen - 1 sampled tokens),
    which llama_perf counts as "eval"; so eval tokens / eval time is llama.cpp's decode-only
    rate, comparable with llama-bench's tg, and the rest of the wall time is what Cove adds
    per token (sampler chain, Python, detokenizing, the pipe).
    """
    out: dict[str, Any] = {}
    pp = [m["llama_n_p_eval"] / (m["llama_p_eval_ms"] / 1000.0) for m in pp_runs if m.get("llama_p_eval_ms") and m.get("llama_n_p_eval")]
    tg = [m["llama_n_eval"] / (m["llama_eval_ms"] / 1000.0) for m in tg_runs if m.get("llama_eval_ms") and m.get("llama_n_eval")]
    outside = [
        1.0 - m["llama_eval_ms"] / (float(m["prefill_ms"]) + float(m["gen_ms"]))
        for m in tg_runs
        if m.get("llama_eval_ms") and m.get("prefill_ms") is not None
    ]
    if pp:
        out["pp_llama_perf_tps"] = statistics.median(pp)
    if tg:
        out["tg_llama_perf_tps"] = statistics.median(tg)
    if outside:
        out["tg_share_outside_decode"] = statistics.median(outside)
    # The outside share by part (the engine's own timers, docs/decisions/token-loop.md), and the
    # parent's CPU time, which on a machine whose cores all decode is taken from the decode.
    parts: dict[str, list[float]] = {}
    for m in tg_runs:
        loop, wall = m.get("token_loop"), float(m.get("prefill_ms") or 0.0) + float(m.get("gen_ms") or 0.0)
        if not loop or wall <= 0 or not m.get("llama_eval_ms"):
            continue
        named = {"picking": loop["pick_ms"], "detokenizing and stops": loop["accept_ms"], "the pipe": loop["send_ms"]}
        for name, ms in named.items():
            parts.setdefault(name, []).append(ms / wall)
        rest = 1.0 - m["llama_eval_ms"] / wall - sum(named.values()) / wall
        parts.setdefault("the rest of the step", []).append(rest)
        if m.get("parent_cpu_ms") is not None:
            parts.setdefault("the parent's CPU (beside)", []).append(float(m["parent_cpu_ms"]) / wall)
    if parts:
        out["tg_outside_parts"] = {name: statistics.median(v) for name, v in parts.items()}
    return out


def _pp_tps(m: dict[str, Any]) -> float:
    evaluated = int(m["prompt_tokens"]) - int(m.get("cached_tokens") or 0)
    return evaluated / (float(m["prefill_ms"]) / 1000.0)


def _tg_tps(m: dict[str, Any]) -> float:
    # prefill_ms is the 1-token decode that yields the first token; gen_ms runs from the
    # first to the last token. Together: n_gen decode+sample steps.
    return int(m["gen_tokens"]) / ((float(m["prefill_ms"]) + float(m["gen_ms"])) / 1000.0)
