"""bench/docs.py --quick --json on its tiny generated corpus (the tests' document corpus, two
small PDFs, the tiny random-weight embedding model; no starter): every figure the full run
reports is there, and every count it measured is positive. No wall-clock threshold."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(600)


def test_a_quick_run_reports_every_figure() -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "docs.py"), "--quick", "--json", "--no-starter"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=REPO_ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout)
    assert set(r) >= {
        "machine",
        "corpus",
        "indexing",
        "memory",
        "embedding_model",
        "latency",
        "latency_real_vectors",
        "recall",
        "brute_force",
        "stall",
    }
    assert "load average" in r["machine"]["load_at_start"] and "load average" in r["machine"]["load_at_end"]
    for kind in ("html", "pdf", "embedded"):
        ix = r["indexing"][kind]
        assert ix["files"] > 0 and ix["chunks"] > 0 and ix["text_mb"] > 0 and ix["text_mb_s"] > 0 and ix["rss_peak_mb"] > 0, ix
    assert r["indexing"]["pdf"]["pages"] == r["corpus"]["pdf_pages"] == 6 and r["indexing"]["pdf"]["pages_s"] > 0
    assert r["indexing"]["embedded"]["vectors"] == r["indexing"]["embedded"]["chunks"]
    assert r["memory"]["tracemalloc_peak_mb"] > 0 and r["memory"]["rss_peak_mb"] > 0
    assert r["embedding_model"]["dim"] > 0 and r["embedding_model"]["note"]  # the tiny model says its recall means nothing
    lat = r["latency"]
    assert lat["queries"] == 40 and lat["random_vectors"] == lat["chunks"] > 0
    assert all(lat[k] > 0 for k in ("bm25_p50", "bm25_p99", "hybrid_p50", "hybrid_p99", "hybrid_cold_ms", "query_embed_ms"))
    real = r["latency_real_vectors"]
    assert real["vectors"] == real["chunks"] > 0 and real["hybrid_p50"] > 0 and real["bm25_p50"] > 0
    for key in ("bm25_all_docs", "bm25_answers", "hybrid_answers"):
        rec = r["recall"][key]
        assert rec["questions"] > 0 and 0 <= rec["hits"] <= rec["questions"], rec
    assert r["recall"]["bm25_all_docs"]["hits"] > 0  # the facts' own words find their files
    assert r["recall"]["answers_collection"]["vectors"] == r["recall"]["answers_collection"]["chunks"] > 0
    assert all(b["vectors"] > 0 and b["p50_ms"] >= 0 for b in r["brute_force"])
    stall = r["stall"]
    assert stall["beats"] > 0 and stall["finished"] and stall["how"]
