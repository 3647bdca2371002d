"""bench/docs_recall.py --quick --json on its tiny generated corpus (the tests' document corpus,
its facts as the questions, the tiny random-weight BERT): every figure the full run reports is
there and in range, and every passage got a vector. No wall-clock threshold. And the people's
question set is well formed: 45 or more questions, each with the pages that answer it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PY_DOCS = Path("/usr/share/doc/python3.11/html")


@pytest.mark.timeout(600)
def test_a_quick_run_reports_every_figure() -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "docs_recall.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=REPO_ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout)
    assert set(r) >= {"machine", "index", "corpus", "embedding_model", "bm25", "hybrid", "latency", "note"}
    assert "load average" in r["machine"]["load_at_start"] and "load average" in r["machine"]["load_at_end"]
    ix = r["index"]
    assert ix["finished"] and ix["files"] > 0 and ix["passages"] == ix["vectors"] > 0, ix
    assert ix["first_build_minutes"] is not None and ix["first_build_minutes"] >= 0
    n = r["bm25"]["questions"]
    assert n > 0 and r["hybrid"]["questions"] == n
    for key in ("bm25", "hybrid"):
        x = r[key]
        assert 0 <= x["hits_at_5"] <= n and x["recall_at_5"] == x["hits_at_5"] / n, x
        assert 0 <= x["mrr_at_10"] <= 1 and len(x["per_question"]) == n
        assert len(x["misses"]) == n - x["hits_at_5"]
        for m in x["misses"]:
            assert m["q"] and m["answers"] and len(m["top3"]) <= 3
        for q in x["per_question"]:
            assert q["rank"] is None or 1 <= q["rank"] <= 10
    assert r["bm25"]["hits_at_5"] > 0  # the facts' own words find their files
    lat = r["latency"]
    assert lat["queries"] == n + 200 and len(lat["runs"]) == 1
    assert all(lat[k] > 0 for k in ("bm25_p50", "bm25_p99", "hybrid_p50", "hybrid_p99", "hybrid_cold_ms", "query_embed_ms"))


def test_the_people_questions_are_well_formed() -> None:
    data = json.loads((REPO_ROOT / "bench" / "docs_people_questions.json").read_text())
    questions = data["questions"]
    assert len(questions) >= 45
    assert len({q["q"] for q in questions}) == len(questions)
    for q in questions:
        assert q["q"].strip() and q["files"] and len(set(q["files"])) == len(q["files"]), q
        for f in q["files"]:
            assert f.endswith(".html") and not f.startswith("/") and not f.startswith("_sources/"), f
            if PY_DOCS.is_dir():
                assert (PY_DOCS / f).is_file(), f
