"""Sampling under a tool grammar against plain decoding, in one process on the starter: the cost
of app/engine/host/grammar_sampler.py's pick per token, with the first pick made as plain decoding
makes it ("fast", what the engine does) and with llama-cpp-python's whole chain on every candidate
("whole", the sampler before), against plain top-k decoding of the same prompt.

The reply is the forced write_file call of bench/tools.py (generic format, the Q:/A: transcript
with the 10 tools in the system message), temperature 0.8, top-k 40, the same seeds for every
kind (fast and whole write the very same tokens). "bounded" is a reply to a JSON format whose
schema bounds integers and numbers (BOUNDED: the tide report of issue 47), sampled as "fast" is,
against plain decoding of the same prompt ("plain-json"). Last, the time to build the grammar of a
200-property schema (LARGE), median of 3 after a first build. Per kind: the sampler's own CPU milliseconds per
token (its thread's time: what a busy shared machine disturbs least), and wall-clock tokens per
second (decoding and sampling; on a busy machine mostly noise).

Run: .venv/bin/python bench/grammar_sampling.py [--tokens 150] [--seeds 3] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

from app.engine.grammar import grammar_for, schema_grammar  # noqa: E402
from app.engine.host.cpu_quirks import extra_buffers  # noqa: E402
from app.engine.host.fallback_formats import FALLBACKS  # noqa: E402
from app.engine.host.grammar_sampler import FirstBytes, GrammarFirstSampler, fast_pick  # noqa: E402
from app.engine.host.llama_open import model_buffers  # noqa: E402
from app.engine.host.token_pick import TopKPick  # noqa: E402
from app.engine.host.utf8_guard import Utf8Tokens, token_texts  # noqa: E402
from app.tools.constraint import tool_constraint  # noqa: E402
from app.tools.families import FAMILIES  # noqa: E402
from app.tools.generic import generic_messages  # noqa: E402
from app.tools.spec import read_openai_tools  # noqa: E402
from bench.tools import SPEED_TASK, TOOLS  # noqa: E402

SETTINGS = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "temp": 0.8}
NO_EOS = (1, 106)  # Gemma's <eos> and <end_of_turn>: plain decoding runs its full length
BOUNDED = {
    "type": "object",
    "properties": {
        "port": {"type": "string", "maxLength": 40},
        "hours": {"type": "integer", "minimum": 1, "maximum": 48},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "height_m": {"type": "number", "exclusiveMinimum": -2.5, "maximum": 16.5},
        "tides": {
            "type": "array",
            "minItems": 1,
            "maxItems": 6,
            "items": {
                "type": "object",
                "properties": {
                    "hour": {"type": "integer", "minimum": 0, "maximum": 23},
                    "metres": {"type": "number", "minimum": -3, "maximum": 15},
                },
                "required": ["hour", "metres"],
                "additionalProperties": False,
            },
        },
        "note": {"type": "string", "maxLength": 200},
    },
    "required": ["port", "hours", "ratio", "height_m", "tides", "note"],
    "additionalProperties": False,
}
JSON_TASK = (
    "Give the tide table for Brest over the next 24 hours as JSON: the port, the hours covered, the share of "
    "high water now (0 to 1), the height in metres, each tide's hour and height, and a long note."
)


def large_schema(n: int = 200) -> dict[str, Any]:
    """n properties: bounded integers and numbers, bounded strings, nested objects, arrays of dates
    and enums; half of them required."""
    kinds: list[dict[str, Any]] = [
        {"type": "integer", "minimum": -40, "maximum": 2030},
        {"type": "number", "exclusiveMinimum": 0, "maximum": 99.5},
        {"type": "string", "maxLength": 40},
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 12}, "b": {"type": "number", "minimum": -1, "maximum": 1}},
            "required": ["a"],
        },
        {"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 4},
        {"type": "array", "items": {"enum": ["low", "mid", "high"]}, "minItems": 1, "maxItems": 8},
    ]
    props = {f"p{i}": kinds[i % len(kinds)] for i in range(n)}
    return {"type": "object", "properties": props, "required": [f"p{i}" for i in range(0, n, 2)]}


def build_ms(schema: dict[str, Any], times: int = 3) -> tuple[float, int]:
    """Median milliseconds to build `schema`'s grammar, after a first build; and its length."""
    grammar = schema_grammar(schema)
    spent = []
    for _ in range(times):
        t0 = time.perf_counter()
        schema_grammar(schema)
        spent.append(1000 * (time.perf_counter() - t0))
    return statistics.median(spent), len(grammar)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", help="a .gguf instead of the starter")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model is None:
        from bench.starter_file import default_model

        args.model = default_model()
    with model_buffers(extra_buffers()[0]):  # as the engine loads it (no AMX buffers where they crash)
        llm = llama_cpp.Llama(args.model, n_ctx=2048, n_threads=args.threads, verbose=False)
    vocab, n_vocab = llm._model.vocab, int(llm.n_vocab())
    tools = read_openai_tools({"tools": TOOLS, "tool_choice": "auto"}).tools
    messages = [{"role": "system", "content": "You are a careful coding agent."}, {"role": "user", "content": SPEED_TASK}]
    prompt = llm.tokenize(FALLBACKS["qa"].render(generic_messages(messages, tools), "", "").encode(), add_bos=True, special=True)
    json_prompt = llm.tokenize(
        FALLBACKS["qa"].render([{"role": "user", "content": JSON_TASK}], "", "").encode(), add_bos=True, special=True
    )
    gbnf = tool_constraint(TOOLS, replace(FAMILIES["generic"], lead=" "), choice="required", name="write_file", parallel=False).gbnf
    bounded = grammar_for({"type": "json_schema", "json_schema": {"name": "tides", "schema": BOUNDED, "strict": True}})
    texts = token_texts(vocab, n_vocab)
    index, utf8 = FirstBytes(vocab, texts), Utf8Tokens(texts)

    def reply(kind: str, seed: int) -> dict[str, Any]:
        llm.reset()
        llm.set_seed(seed)
        llm.eval(json_prompt if kind in ("plain-json", "bounded") else prompt)
        sampler: Any
        if kind in ("plain", "plain-json"):
            sampler = TopKPick(SETTINGS["top_k"], SETTINGS["top_p"], SETTINGS["min_p"], SETTINGS["temp"], seed)
        else:
            fast = fast_pick(SETTINGS, n_vocab, seed) if kind in ("fast", "bounded") else None
            sampler = GrammarFirstSampler(
                llm._init_sampler(**SETTINGS),
                vocab,
                bounded if kind == "bounded" else gbnf,
                n_vocab,
                fast=fast,
                first_bytes=lambda: index,
                utf8=lambda: utf8,
            )
        out: list[int] = []
        sample_s = 0.0
        wall0 = time.perf_counter()
        for _ in range(args.tokens):
            t0 = time.thread_time()
            if kind in ("plain", "plain-json"):  # the row biased in place, as BiasedPick does with logit_bias
                np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))[list(NO_EOS)] -= 100.0
                token = sampler.pick(llm, -1)
            else:
                token = sampler.sample(llm._ctx, -1)
            sample_s += time.thread_time() - t0
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            out.append(token)
            llm.eval([token])
        wall = time.perf_counter() - wall0
        info = {
            "kind": kind,
            "seed": seed,
            "tokens": len(out),
            "tok_s": len(out) / wall,
            "sample_ms": 1000 * sample_s / max(len(out), 1),
            "refused": getattr(sampler, "refused", None),
            "text": llm.detokenize(out).decode("utf-8", "replace"),
        }
        sampler.close()
        return info

    kinds = ("plain", "whole", "fast", "plain-json", "bounded")
    runs = [reply(kind, seed) for seed in range(1, args.seeds + 1) for kind in kinds]
    by = {k: [r for r in runs if r["kind"] == k] for k in kinds}
    same = all(w["text"] == f["text"] for w, f in zip(by["whole"], by["fast"], strict=True))
    med = {
        k: {"tok_s": statistics.median(r["tok_s"] for r in v), "sample_ms": statistics.median(r["sample_ms"] for r in v)}
        for k, v in by.items()
    }
    against = {"whole": "plain", "fast": "plain", "bounded": "plain-json"}
    ratios = {k: statistics.median(r["tok_s"] / p["tok_s"] for r, p in zip(by[k], by[base], strict=True)) for k, base in against.items()}
    valid = [_valid(r["text"]) for r in by["bounded"]]
    large_ms, large_chars = build_ms(large_schema())
    result = {
        "runs": runs,
        "medians": med,
        "ratio_to_plain": ratios,
        "fast_same_tokens_as_whole": same,
        "bounded_valid": valid,
        "large_schema_build_ms": large_ms,
        "large_schema_grammar_chars": large_chars,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for r in runs:
        print(
            f"{r['kind']:<10} seed {r['seed']}: {r['tokens']:>4} tokens, {r['tok_s']:6.1f} tok/s, sampling "
            f"{r['sample_ms']:6.2f} ms/token, refused {r['refused']}"
        )
    print(
        f"medians: plain {med['plain']['tok_s']:.1f}, whole chain {med['whole']['tok_s']:.1f}, fast "
        f"{med['fast']['tok_s']:.1f} tok/s; sampling {med['plain']['sample_ms']:.2f} / "
        f"{med['whole']['sample_ms']:.2f} / {med['fast']['sample_ms']:.2f} ms/token"
    )
    print(f"grammar / plain: whole chain {ratios['whole']:.3f}, fast {ratios['fast']:.3f}; fast wrote the whole chain's tokens: {same}")
    print(
        f"bounded JSON / plain: {ratios['bounded']:.3f} ({med['bounded']['tok_s']:.1f} against "
        f"{med['plain-json']['tok_s']:.1f} tok/s); replies valid under their schema: {valid}"
    )
    print(f"grammar of a 200-property schema: {large_ms:.1f} ms (median of 3), {large_chars:,} characters")
    return 0


def _valid(text: str) -> bool | None:
    """Whether a bounded reply validates against BOUNDED (None: cut by --tokens before it ended)."""
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return None
    return jsonschema.Draft202012Validator(BOUNDED).is_valid(value)


if __name__ == "__main__":
    raise SystemExit(main())
