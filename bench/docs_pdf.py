"""PDF reading (issue 50): pypdf against PDFium (pypdfium2) on real PDFs, speed and text.

For each PDF and in total, three ways of reading it, each run in a fresh child process (so its
memory is its own):
- pypdf: app/docs/readers/pdf.read_pdf with PDFium turned off, the reader as it was (pypdf reads
  every page, its time looked at per operator);
- cove: read_pdf as shipped (pypdf opens the file and measures each page, PDFium extracts);
- pdfium: pypdfium2 alone, page by page, no measuring (what PDFium costs by itself).
Reported: pages/s, the time from opening the file to the first page's text, and the child's peak
RSS (getrusage, interpreter and imports included; its RSS before the read is given apart).
Figures are medians of --runs (3) runs; the ratios are of those medians, measured in one run.

Text: per page, pypdf's text against the text cove's reader gave (PDFium's, normalised): the
word-level similarity (difflib's ratio over the two word lists) and the "dictionary-like" words
one has and the other lacks. There is no word list on this machine, so a word is dictionary-like
when it is letters only, 3 or more of them, and it occurs at least 3 times over the whole
corpus in both extractions (a real word, not a fragment one reader made: "pack-" + "ages" gives
no such word, "packages" is one).

Run:  .venv/bin/python bench/docs_pdf.py [--json] [--runs 3] [PDF ...]
Default corpus: the R manuals (apt-get install r-doc-pdf: /usr/share/R/doc/manual/*.pdf, the
full reference manual, a copy of refman.pdf, left out). Figures: docs/decisions/pdf-reader.md.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
R_MANUALS = Path("/usr/share/R/doc/manual")
MODES = ("pypdf", "cove", "pdfium")
_WORD = re.compile(r"[^\W\d_]+|\S")


def _child(mode: str, path: Path, texts_out: str | None) -> None:
    """Read `path` the `mode` way; print one JSON line (pages, seconds, first_s, rss before/peak)."""
    sys.path.insert(0, str(ROOT))
    if mode == "pdfium":
        import pypdfium2 as pdfium

        from app.docs.readers import pdf_pdfium
    else:
        from app.docs.readers import pdf, read_sections
        from app.docs.readers.limits import Budget, Limits

        if mode == "pypdf":
            pdf._pdfium = lambda file, count: None  # every page read by pypdf, as before PDFium
    rss_before = _rss_kb()
    texts: dict[int, str] = {}
    began = time.perf_counter()
    first = None
    pages = 0
    if mode == "pdfium":
        with open(path, "rb") as file:
            document = pdfium.PdfDocument(file)
            pages = len(document)
            for i in range(pages):
                page = document[i]
                textpage = page.get_textpage()
                text = pdf_pdfium.text(textpage.get_text_bounded()).strip()
                textpage.close()
                page.close()
                if text and first is None:
                    first = time.perf_counter() - began
                texts[i + 1] = text
            document.close()
    else:
        counted = [0]

        def on_page(number: int, count: int) -> None:
            counted[0] = count

        budget = Budget(Limits(seconds=24 * 3600))  # no time cut: every page is read
        for section in read_sections(path, budget, on_page=on_page):
            if first is None:
                first = time.perf_counter() - began
            assert section.page is not None
            texts[section.page] = section.text.strip()
        pages = counted[0]
    seconds = time.perf_counter() - began
    if texts_out:
        Path(texts_out).write_text(json.dumps(texts))
    print(json.dumps({"pages": pages, "seconds": seconds, "first_s": first, "rss_before_kb": rss_before, "peak_rss_kb": _rss_kb()}))


def _rss_kb() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _run(mode: str, path: Path, texts_out: str | None = None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path), *(["--texts", texts_out] if texts_out else [])],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        sys.exit(f"{mode} on {path} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _quality(old: dict[int, str], new: dict[int, str], vocabulary: set[str]) -> dict[str, float]:
    """Per page similarity (median and the lowest) and the dictionary-like words each lacks."""
    ratios: list[float] = []
    only_old = only_new = 0
    for page in sorted(set(old) | set(new)):
        a, b = _words(old.get(page, "")), _words(new.get(page, ""))
        ratios.append(difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a or b else 1.0)
        ca = Counter(w for w in a if w in vocabulary)
        cb = Counter(w for w in b if w in vocabulary)
        only_old += sum((ca - cb).values())
        only_new += sum((cb - ca).values())
    return {
        "pages_compared": len(ratios),
        "similarity_median": statistics.median(ratios) if ratios else 1.0,
        "similarity_mean": statistics.fmean(ratios) if ratios else 1.0,
        "similarity_min": min(ratios) if ratios else 1.0,
        "pages_below_0.9": sum(1 for r in ratios if r < 0.9),
        "dictionary_words_only_pypdf": only_old,
        "dictionary_words_only_cove": only_new,
    }


def _vocabulary(*extractions: dict[int, str]) -> set[str]:
    counts = [Counter(w for text in e.values() for w in _words(text) if w.isalpha() and len(w) >= 3) for e in extractions]
    return {w for w in counts[0] if all(c[w] >= 3 for c in counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--table-from", type=Path, help="print the table of a saved --json output")
    args = parser.parse_args()
    if args.table_from:
        saved = json.loads(args.table_from.read_text())
        _table(saved["rows"], saved["total"], saved["runs"])
        return
    if args.child:
        _child(args.child, args.pdfs[0], args.texts)
        return
    pdfs = args.pdfs or sorted(p for p in R_MANUALS.glob("*.pdf") if p.name != "fullrefman.pdf")
    if not pdfs:
        sys.exit(f"no PDFs: give some, or apt-get install r-doc-pdf ({R_MANUALS})")
    rows: list[dict[str, object]] = []
    texts: dict[str, dict[str, dict[int, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in pdfs:
            row: dict[str, object] = {"pdf": path.name, "bytes": path.stat().st_size}
            texts[path.name] = {}
            for mode in MODES:
                out = os.path.join(tmp, f"{path.name}.{mode}.json")
                runs = [_run(mode, path, out if n == 0 else None) for n in range(args.runs)]
                texts[path.name][mode] = {int(k): v for k, v in json.loads(Path(out).read_text()).items()}
                row["pages"] = int(runs[0]["pages"])
                row[f"{mode}_s"] = statistics.median(r["seconds"] for r in runs)
                row[f"{mode}_first_s"] = statistics.median(r["first_s"] for r in runs)
                row[f"{mode}_peak_rss_mb"] = statistics.median(r["peak_rss_kb"] for r in runs) / 1024
                row[f"{mode}_rss_before_mb"] = statistics.median(r["rss_before_kb"] for r in runs) / 1024
            rows.append(row)
    vocabulary = _vocabulary(*({p: t for name in texts for p, t in texts[name][mode].items()} for mode in ("pypdf", "cove")))
    for row in rows:
        row.update(_quality(texts[str(row["pdf"])]["pypdf"], texts[str(row["pdf"])]["cove"], vocabulary))
    total: dict[str, object] = {"pdf": "TOTAL", "pages": sum(int(str(r["pages"])) for r in rows)}
    for mode in MODES:
        total[f"{mode}_s"] = sum(float(str(r[f"{mode}_s"])) for r in rows)
    all_old = {(r, p): t for r in texts for p, t in texts[r]["pypdf"].items()}
    all_new = {(r, p): t for r in texts for p, t in texts[r]["cove"].items()}
    ratios = [
        difflib.SequenceMatcher(None, _words(all_old.get(k, "")), _words(all_new.get(k, "")), autojunk=False).ratio()
        for k in set(all_old) | set(all_new)
    ]
    total["similarity_median"] = statistics.median(ratios)
    total["similarity_mean"] = statistics.fmean(ratios)
    total["pages_below_0.9"] = sum(1 for r in ratios if r < 0.9)
    total["dictionary_words_only_pypdf"] = sum(int(str(r["dictionary_words_only_pypdf"])) for r in rows)
    total["dictionary_words_only_cove"] = sum(int(str(r["dictionary_words_only_cove"])) for r in rows)
    for row in [*rows, total]:
        for mode in MODES:
            row[f"{mode}_pages_per_s"] = int(str(row["pages"])) / float(str(row[f"{mode}_s"]))
        row["cove_speedup"] = float(str(row["pypdf_s"])) / float(str(row["cove_s"]))
        if "pypdf_first_s" in row:
            row["cove_first_page_speedup"] = float(str(row["pypdf_first_s"])) / float(str(row["cove_first_s"]))
    if args.json:
        print(json.dumps({"runs": args.runs, "rows": rows, "total": total}, indent=2))
        return
    _table(rows, total, args.runs)


def _table(rows: list[dict[str, object]], total: dict[str, object], runs: int) -> None:
    print(f"medians of {runs} runs, each in a fresh process; similarity: pypdf vs cove, words, per page")
    head = (
        f"{'pdf':<12}{'pages':>6} | {'pages/s pypdf':>13}{'cove':>7}{'pdfium':>8}{'x':>6} | "
        f"{'first page s pypdf':>18}{'cove':>7}{'pdfium':>7} | {'peak MB pypdf':>13}{'cove':>6}{'pdfium':>7} | "
        f"{'sim med':>7}{'<0.9':>5}{'only pypdf':>11}{'only cove':>10}"
    )
    print(head)
    print("-" * len(head))
    for row in [*rows, total]:
        first = (
            f"{row['pypdf_first_s']:>18.2f}{row['cove_first_s']:>7.2f}{row['pdfium_first_s']:>7.2f}" if "pypdf_first_s" in row else " " * 32
        )
        peak = (
            f"{row['pypdf_peak_rss_mb']:>13.0f}{row['cove_peak_rss_mb']:>6.0f}{row['pdfium_peak_rss_mb']:>7.0f}"
            if "pypdf_peak_rss_mb" in row
            else " " * 26
        )
        print(
            f"{row['pdf']!s:<12}{row['pages']:>6} | {row['pypdf_pages_per_s']:>13.1f}{row['cove_pages_per_s']:>7.0f}"
            f"{row['pdfium_pages_per_s']:>8.0f}{row['cove_speedup']:>6.1f} | {first} | {peak} | "
            f"{row['similarity_median']:>7.3f}{row['pages_below_0.9']:>5}{row['dictionary_words_only_pypdf']:>11}{row['dictionary_words_only_cove']:>10}"
        )


if __name__ == "__main__":
    main()
