"""How well Cove's document search finds the page a person's question needs (issue 50): recall@5
and MRR@10, BM25 alone and hybrid, on questions phrased as people ask, over the whole Python docs
folder indexed as a person would index it; and query latency over the same index.

The index: Debian's python3.11-doc HTML, /usr/share/doc/python3.11/html, as one collection made
with `DocumentIndex.create(name, [root])` (the default include/exclude patterns,
app/docs/patterns.py DEFAULT_EXCLUDES: no `_sources`, `_static`, `searchindex.js` or Sphinx's index
pages) and indexed by `index_collection(..., embedder=EngineEmbedder(model))` with the default
embedder (all-MiniLM-L6-v2, bench/docs_embed.py's default_model() fetches and converts it into
~/.cache/cove/bench). The index is kept in ~/.cache/cove/bench/docs-people/documents.db and reused
(the indexer is incremental: a later run only checks the files); the first build embeds every
passage (about 16,600; some 15 minutes on two cores), and how long it took is kept beside it
(build.json) and reported. `--build-only` builds (or brings up to date) the index and stops; with
`--index` naming a new file, that build is the whole-docs indexing run: its minutes, the MB/s of the
files indexed, and the peak RSS of the indexer (this process) and of its embedding host.

The questions: bench/docs_people_questions.json, phrased as a person who does not know the
module names asks (no name from the answer page, no sentence lifted from it), each with every page
that answers it (paths relative to the html folder). And a held-out set,
bench/docs_heldout_questions.json (40), written afterwards by someone who had seen neither the
first set nor a search result: app/docs/search.py's fusion weight was chosen on the first set, and
this one checks the choice.

Reported, for BM25 (search without an embedder) and hybrid (with it), app/docs/search.search as it is:
- recall@5: the share of questions with a passage of a right page among the top 5 results
  (search(limit=5), what a turn gets); a question counts once however many right passages it has;
- MRR@10: the mean of 1/rank of the first right page among the first 10 distinct pages of the
  results (search(limit=50), pages in the order their first passage comes), 0 when none is;
- the misses (recall@5): the question and the first 3 distinct pages found;
- query latency p50/p99 (limit=5) over the questions plus 200 of the docs' own headings
  (bench/docs.py's query_set), the first hybrid query of each run (the vector matrix read from
  SQLite) apart; medians of --runs (3).
Goals (issue 50): hybrid recall@5 >= 0.90; p50 <= 50 ms BM25, <= 150 ms hybrid.

Run:  .venv/bin/python bench/docs_recall.py [--json] [--runs 3] [--build-only] [--quick]
--quick: a tiny generated corpus (tests/support/docs_corpus.py, its facts as the questions) and the
tiny random-weight BERT (tests/support/tiny_bert.py) in a temporary folder, one run: seconds
(tests/bench/test_docs_recall_bench.py); its recall means nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.docs import installed, latency, load_avg, query_set, same_page  # noqa: E402

PY_DOCS = Path("/usr/share/doc/python3.11/html")
QUESTIONS = Path(__file__).with_name("docs_people_questions.json")
HELD_OUT = Path(__file__).with_name("docs_heldout_questions.json")  # checks the fusion weight chosen on QUESTIONS
CACHE = Path.home() / ".cache" / "cove" / "bench" / "docs-people"
NAME = "python-docs"
HEADINGS = 200  # the docs' own headings added to the questions for latency
DEEP = 50  # results asked for to rank distinct pages for MRR@10


# ---- the index ------------------------------------------------------------------------------------


def counts(db: Path, name: str) -> dict[str, int]:
    from app.docs.index_db import DocumentIndex

    index = DocumentIndex(db)
    q = index.conn.execute
    files = q("SELECT count(*) FROM files WHERE collection = ? AND status = 'indexed'", (name,)).fetchone()[0]
    chunks = q("SELECT count(*) FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.collection = ?", (name,)).fetchone()[0]
    vectors = q(
        "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id WHERE f.collection = ?",
        (name,),
    ).fetchone()[0]
    index.close()
    return {"files": int(files), "passages": int(chunks), "vectors": int(vectors)}


def build(db: Path, name: str, root: Path, model_path: Path, log: Any = None) -> dict[str, Any]:
    """Create the collection (default patterns) if missing and bring it up to date with the
    embedder; this run's seconds, and the first build's (the runs until one finished) from build.json."""
    from app.docs.embedding import EngineEmbedder
    from app.docs.index_db import DocumentIndex
    from app.docs.indexer import index_collection

    db.parent.mkdir(parents=True, exist_ok=True)
    meta_path = db.parent / "build.json"
    index = DocumentIndex(db)
    if index.collection(name) is None:
        index.create(name, [root])  # include/exclude None: the default patterns
        meta_path.write_text(json.dumps({"runs": [], "first_build_s": None}))
    index.close()
    # build.json is written when this bench creates the collection; without it the first build is unknown
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"runs": [], "first_build_s": None, "unknown": True}

    last = [0.0, -1, -1]

    def progress(p: Any) -> None:
        if log is None:
            return
        now = time.monotonic()
        if now - last[0] >= 30 or p.finished or (p.files_done == p.files_total and last[1] != p.files_done):
            last[0], last[1] = now, p.files_done
            print(
                f"{time.strftime('%H:%M:%S')} files {p.files_done}/{p.files_total} vectors {p.vectors_done}/{p.vectors_total}"
                f"{' finished' if p.finished else ''}",
                file=log,
                flush=True,
            )

    embedder = EngineEmbedder(installed(model_path))
    try:
        t0 = time.perf_counter()
        done = index_collection(db, name, embedder=embedder, on_progress=progress, lower_priority=False)
        seconds = time.perf_counter() - t0
    finally:
        embedder.close()
    c = counts(db, name)
    # The indexer's process is this one; the embedding host is its child, counted once it has exited.
    peaks = {
        "indexer_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "embedding_host_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }
    mb = indexed_mb(db, name)
    if meta["first_build_s"] is None and not meta.get("unknown"):
        meta["runs"].append({"seconds": round(seconds, 1), "finished": done.finished, "vectors": c["vectors"]})
        if done.finished and c["vectors"] == c["passages"]:
            meta["first_build_s"] = round(sum(r["seconds"] for r in meta["runs"]), 1)
        meta_path.write_text(json.dumps(meta, indent=2))
    return {
        **c,
        "this_run_s": round(seconds, 1),
        "finished": done.finished,
        "problems": len(done.problems),
        "left_out": len(done.left_out),
        "first_build_minutes": round(meta["first_build_s"] / 60, 1) if meta["first_build_s"] is not None else None,
        "index": str(db),
        "indexed_mb": round(mb, 1),
        "this_run_mb_s": round(mb / seconds, 3) if seconds > 0 else None,
        **peaks,
    }


def indexed_mb(db: Path, name: str) -> float:
    """MB of the files the collection holds (as stored on disk: a .gz counts compressed)."""
    from app.docs.index_db import DocumentIndex

    index = DocumentIndex(db)
    try:
        paths = [str(p) for (p,) in index.conn.execute("SELECT path FROM files WHERE collection = ? AND status = 'indexed'", (name,))]
    finally:
        index.close()
    return sum(os.stat(p).st_size for p in paths if os.path.exists(p)) / 1e6


# ---- retrieval quality ------------------------------------------------------------------------------


def rel_page(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).name


def distinct_pages(found: list[Any], root: Path) -> list[str]:
    """The pages of `found` in the order their first passage comes."""
    return list(dict.fromkeys(rel_page(p.path, root) for p in found))


def quality(db: Path, name: str, root: Path, questions: list[dict[str, Any]], embedder: Any | None) -> dict[str, Any]:
    """recall@5 (top 5 passages), MRR@10 (first 10 distinct pages), the misses with the top 3 pages."""
    from app.docs.index_db import DocumentIndex
    from app.docs.search import search

    index = DocumentIndex(db)
    hits, rr, per_q, misses = 0, 0.0, [], []
    try:
        for q in questions:
            top5 = search(index, [name], q["q"], limit=5, embedder=embedder)
            hit = any(same_page(p.path, root, q["files"]) for p in top5)
            pages = distinct_pages(search(index, [name], q["q"], limit=DEEP, embedder=embedder), root)[:10]
            rank = next((i for i, page in enumerate(pages, start=1) if same_page(str(root / page), root, q["files"])), None)
            hits += hit
            rr += 1 / rank if rank else 0.0
            per_q.append({"q": q["q"], "hit_at_5": hit, "rank": rank})
            if not hit:
                misses.append({"q": q["q"], "answers": q["files"], "top3": distinct_pages(top5, root)[:3], "rank_in_10": rank})
    finally:
        index.close()
    n = len(questions)
    return {
        "questions": n,
        "hits_at_5": hits,
        "recall_at_5": hits / n if n else float("nan"),
        "mrr_at_10": rr / n if n else float("nan"),
        "misses": misses,
        "per_question": per_q,
    }


# ---- the run ------------------------------------------------------------------------------------------


def quick_setup(work: Path) -> tuple[Path, list[dict[str, Any]], Path]:
    from tests.support.docs_corpus import write_corpus
    from tests.support.tiny_bert import write_tiny_bert

    corpus = write_corpus(work / "docs", bad=False)
    questions = [{"q": f.text, "files": [f.path]} for f in corpus.facts]
    return work / "docs", questions, write_tiny_bert(work / "tiny-bert.gguf")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.docs.embedding import EngineEmbedder

    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "load_at_start": load_avg()},
    }
    work = Path(tempfile.mkdtemp(prefix="cove-docs-recall-")) if args.quick else None
    try:
        if work is not None:
            root, questions, model_path = quick_setup(work)
            db, runs = work / "index" / "documents.db", 1
            result["note"] = "quick: a generated corpus and the tiny random-weight BERT; its recall means nothing"
        else:
            from bench.docs_embed import default_model

            root, db, runs = args.corpus, args.index, args.runs
            questions = []  # read after the build: --build-only needs none
            model_path = args.model or default_model()
        log = sys.stderr if args.progress else None
        result["index"] = build(db, NAME, root, model_path, log)
        result["corpus"] = str(root)
        if args.build_only:
            return result
        sets = {"people": questions}
        if work is None:
            questions = json.loads(QUESTIONS.read_text())["questions"]
            sets = {"people": questions, "held_out": json.loads(HELD_OUT.read_text())["questions"]}
        from app.docs.embedding import QUERY_NICE

        embedder = EngineEmbedder(installed(model_path), nice=QUERY_NICE)  # as a search embeds its question
        try:
            embedder.embed(["probe"])  # loaded before anything is timed
            result["embedding_model"] = {"name": embedder.model_name, "path": str(model_path)}
            result["bm25"] = quality(db, NAME, root, questions, None)
            result["hybrid"] = quality(db, NAME, root, questions, embedder)
            if "held_out" in sets:
                result["held_out"] = {
                    "bm25": quality(db, NAME, root, sets["held_out"], None),
                    "hybrid": quality(db, NAME, root, sets["held_out"], embedder),
                }
            queries = query_set(db, NAME, questions, len(questions) + HEADINGS)
            result["latency"] = latency(db, NAME, queries, embedder, runs)
        finally:
            embedder.close()
        result["machine"]["load_at_end"] = load_avg()
        return result
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def table(r: dict[str, Any]) -> str:
    ix = r["index"]
    out = [
        f"# {r['command']}",
        f"machine: {r['machine']['cpus']} cpus; start: {r['machine']['load_at_start']}",
        f"         end: {r['machine'].get('load_at_end', '?')}",
        f"index: {r['corpus']} (default excludes), {ix['files']} files, {ix['passages']} passages, {ix['vectors']} vectors; "
        f"first build {ix['first_build_minutes']} min, this run {ix['this_run_s']} s ({ix['index']})",
        f"this run: {ix['indexed_mb']} MB of files at {ix['this_run_mb_s']} MB/s; peak RSS: indexer "
        f"{ix['indexer_peak_rss_mb']} MB, embedding host {ix['embedding_host_peak_rss_mb']} MB",
    ]
    if "bm25" not in r:
        return "\n".join(out)
    if r.get("note"):
        out.append(r["note"])
    out.append(f"embedding model: {r['embedding_model']['name']} ({r['embedding_model']['path']})")
    n = r["bm25"]["questions"]
    out.append(f"{'':8} {'recall@5':>14} {'MRR@10':>7}   ({n} questions)")
    for key, label in (("bm25", "BM25"), ("hybrid", "hybrid")):
        x = r[key]
        out.append(f"{label:8} {x['recall_at_5']:5.2f} ({x['hits_at_5']:2}/{n:2}) {x['mrr_at_10']:7.3f}")
    if "held_out" in r:
        h = r["held_out"]
        m = h["bm25"]["questions"]
        out.append(f"held-out set ({m} questions, bench/docs_heldout_questions.json):")
        for key, label in (("bm25", "BM25"), ("hybrid", "hybrid")):
            x = h[key]
            out.append(f"{label:8} {x['recall_at_5']:5.2f} ({x['hits_at_5']:2}/{m:2}) {x['mrr_at_10']:7.3f}")
    lat = r["latency"]
    out.append(
        f"latency over {lat['queries']} queries (questions + headings), limit 5, medians of {len(lat['runs'])} run(s): "
        f"BM25 p50 {lat['bm25_p50']:.1f} p99 {lat['bm25_p99']:.1f} ms; hybrid p50 {lat['hybrid_p50']:.1f} "
        f"p99 {lat['hybrid_p99']:.1f} ms; first hybrid (cold) {lat['hybrid_cold_ms']:.0f} ms; "
        f"query embedding {lat['query_embed_ms']:.1f} ms"
    )
    misses_of = [("BM25", r["bm25"]), ("hybrid", r["hybrid"])]
    if "held_out" in r:
        misses_of.append(("held-out hybrid", r["held_out"]["hybrid"]))
    for label, x in misses_of:
        misses = x["misses"]
        out.append(f"missed by {label} ({len(misses)}):")
        for m in misses:
            rank = f"; first right page at {m['rank_in_10']} of 10" if m["rank_in_10"] else ""
            out.append(f"  {m['q']!r} -> {', '.join(m['top3']) or 'nothing'} (answer: {', '.join(m['answers'])}{rank})")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tiny generated corpus and the tiny BERT, one run (seconds)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--build-only", action="store_true", help="build or update the index, then stop")
    parser.add_argument("--progress", action="store_true", help="indexing progress on stderr")
    parser.add_argument("--model", type=Path, help="the embedding GGUF (default: the default embedder)")
    parser.add_argument("--corpus", type=Path, default=PY_DOCS)
    parser.add_argument("--index", type=Path, default=CACHE / "documents.db")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
