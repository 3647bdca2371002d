"""`cove docs` and `cove chat --docs`, run as a person runs them (a subprocess with its own
COVE_HOME) on a corpus of real documents: collections made, listed, searched, reindexed and
removed, and a chat whose reply carries its passages into the history and the record."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from app.docs.turn_sources import cited_numbers
from tests.support.cli import assert_clean_error, cove
from tests.support.docs_corpus import LIGHTHOUSE, WARRANTY, Corpus, write_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return write_corpus(tmp_path / "papers")


def fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_size < 50_000_000:
            out[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def test_a_collection_is_made_indexed_searched_and_removed_without_touching_the_files(tmp_path: Path, corpus: Corpus) -> None:
    home = tmp_path / "home"
    before = fingerprint(corpus.root)
    added = cove(home, "docs", "add", "papers", str(corpus.root))
    assert added.returncode == 0, added.stderr
    assert "Traceback" not in added.stderr and "files with a note (left out, not readable or cut)" in added.stdout
    assert "no embedding model is installed, so papers is searched by keywords only; `cove setup` gets" in added.stderr
    for relative, fragment in corpus.bad.items():  # every bad case is listed with its sentence
        line = next(line for line in added.stdout.splitlines() if line.strip().startswith(str(corpus.root / relative)))
        assert fragment in line, (relative, line)

    status = json.loads(cove(home, "docs", "status", "papers", "--json").stdout)
    readable = len(corpus.good) + (1 if corpus.unreadable and os.geteuid() == 0 else 0)  # root reads the chmod 000 file
    assert status["files_indexed"] == readable and status["chunks"] > 0 and status["pending"] == 0
    assert status["embedding_model"] is None  # no embedding model installed: keywords only
    assert "papers: " in cove(home, "docs", "list").stdout

    found = json.loads(cove(home, "docs", "search", "papers", "how many gulls did the keeper count", "--json").stdout)
    fact = corpus.fact("417 gulls")
    assert found[0]["path"] == str(corpus.root / fact.path) and found[0]["page"] == fact.page == 3
    assert LIGHTHOUSE in found[0]["text"] and found[0]["rank_bm25"] == 1 and found[0]["where"] == "page 3"
    warranty = json.loads(cove(home, "docs", "search", "papers", "kettle warranty years", "--json").stdout)
    assert warranty[0]["heading"] == corpus.fact("seven years").heading and WARRANTY in warranty[0]["text"]
    shown = cove(home, "docs", "search", "papers", "gulls")
    assert shown.returncode == 0 and "[1] " in shown.stdout and "(page 3)" in shown.stdout
    for odd in ['"', "NEAR(", "*", "OR", "🙂", "a AND", "!!!"]:
        done = cove(home, "docs", "search", "papers", odd)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (odd, done.stderr)

    removed = cove(home, "docs", "remove", "papers")
    assert removed.returncode == 0 and "not touched" in removed.stdout
    assert "No collections yet" in cove(home, "docs", "list").stdout
    assert fingerprint(corpus.root) == before  # never changed, moved or copied
    index = next(home.rglob("documents.db"))
    assert LIGHTHOUSE.encode() not in index.read_bytes()  # removed, and vacuumed away


def test_reindex_reads_only_what_changed_and_drops_what_is_gone(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Garden\n\nThe quince tree flowers in April.\n")
    (folder / "b.txt").write_text("The tide tables are printed on blue paper.\n")
    assert cove(home, "docs", "add", "notes", str(folder)).returncode == 0
    (folder / "a.md").write_text("# Garden\n\nThe quince tree flowers in late March now.\n")
    (folder / "b.txt").unlink()
    (folder / "c.txt").write_text("Mooring fees rose to nine florins.\n")
    again = cove(home, "docs", "reindex", "notes")
    assert again.returncode == 0, again.stderr
    assert "2 files indexed" in again.stdout
    assert json.loads(cove(home, "docs", "search", "notes", "tide tables blue", "--json").stdout) == []
    march = json.loads(cove(home, "docs", "search", "notes", "quince March", "--json").stdout)
    assert march[0]["heading"] == "Garden" and "late March" in march[0]["text"]
    assert json.loads(cove(home, "docs", "search", "notes", "mooring florins", "--json").stdout)[0]["path"].endswith("c.txt")


def test_bad_names_and_paths_get_a_sentence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert "no collection named nope" in assert_clean_error(cove(home, "docs", "search", "nope", "x"))
    assert "no collection named nope" in assert_clean_error(cove(home, "docs", "reindex", "nope"))
    line = assert_clean_error(cove(home, "docs", "add", "x", str(tmp_path / "missing")))
    assert "does not exist" in line
    folder = tmp_path / "f"
    folder.mkdir()
    assert cove(home, "docs", "add", "x", str(folder)).returncode == 0
    assert "no collection named y" in assert_clean_error(cove(home, "chat", "--docs", "y", "hello"))


def test_chat_with_a_collection_gives_the_model_the_passages_and_keeps_their_provenance(
    tmp_path: Path, corpus: Corpus, tiny_gguf: Path
) -> None:
    home = tmp_path / "home"
    assert cove(home, "docs", "add", "papers", str(corpus.root)).returncode == 0
    done = cove(
        home,
        "chat",
        "--model",
        str(tiny_gguf),
        "--new",
        "--docs",
        "papers",
        "--max-tokens",
        "8",
        "--seed",
        "1",
        "--json",
        "How many gulls did the lighthouse keeper count?",
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    sources = reply["sources"]
    assert sources and sources[0]["n"] == 1 and sources[0]["path"] == str(corpus.root / "report.pdf")
    assert sources[0]["page"] == 3 and LIGHTHOUSE in sources[0]["excerpt"]
    assert {s["n"] for s in sources if s["cited"]} == cited_numbers(reply["text"], len(sources))

    entries = [json.loads(line) for line in cove(home, "record", "export", "--format", "jsonl").stdout.splitlines()]
    entry = next(e for e in entries if e.get("conversation_id") == reply["conversation_id"])
    params = entry["params"] if isinstance(entry["params"], dict) else json.loads(entry["params"])
    kept = params["documents"]
    assert [d["n"] for d in kept] == [s["n"] for s in sources]
    for d, s in zip(kept, sources):
        assert d["hash"] == hashlib.sha256(s["excerpt"].encode()).hexdigest()  # the chunk exactly as shown
        assert (d["path"], d["start"], d["end"], d["page"]) == (s["path"], s["start"], s["end"], s["page"])
    messages = entry["messages"] if isinstance(entry["messages"], list) else json.loads(entry["messages"])
    shown = messages[-1]["content"]
    assert "[1] report.pdf, page 3" in shown and LIGHTHOUSE in shown and shown.endswith("lighthouse keeper count?")

    history = json.loads(cove(home, "history", "show", reply["conversation_id"][:8], "--json").stdout)
    assert history["messages"][0]["content"] == "How many gulls did the lighthouse keeper count?"  # the person's words only

    # The collection stays attached: the next turn of the conversation searches it without --docs.
    follow = cove(
        home, "chat", "--conversation", reply["conversation_id"], "--max-tokens", "4", "--json", "And the warranty on the kettle?"
    )
    assert follow.returncode == 0, follow.stderr
    assert any(WARRANTY in s["excerpt"] for s in json.loads(follow.stdout)["sources"])


def test_long_passages_are_fitted_so_the_prompt_stays_within_a_small_context(tmp_path: Path, tiny_gguf: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "long"
    folder.mkdir()
    for i in range(6):
        body = "\n\n".join(f"Harbour ledger {i} entry {j}: the harbour dues were paid in full by the schooner." for j in range(120))
        (folder / f"ledger{i}.txt").write_text(body)
    assert cove(home, "docs", "add", "ledgers", str(folder)).returncode == 0
    for ctx in (1024, 512):
        done = cove(
            home,
            "chat",
            "--model",
            str(tiny_gguf),
            "--new",
            "--docs",
            "ledgers",
            "--ctx",
            str(ctx),
            "--max-tokens",
            "16",
            "--json",
            "Which schooner paid the harbour dues?",
        )
        assert done.returncode == 0, done.stderr
        reply = json.loads(done.stdout)
        assert reply["status"] in {"complete", "length"}, reply["error"]
        metrics = reply["metrics"]
        assert metrics["prompt_tokens"] + metrics["gen_tokens"] <= ctx
        assert metrics["passages_kept"] == len(reply["sources"])  # the sources are what the model was shown
        if ctx == 1024:
            assert reply["sources"], "a passage fits a context of 1024"


def test_what_is_left_out_is_counted_listed_and_the_patterns_can_be_changed(tmp_path: Path) -> None:
    from app.docs.patterns import DEFAULT_EXCLUDES
    from tests.app.docs.test_walk_patterns import KEPT, LEFT_OUT, SOURCE_ONLY, write_sphinx_tree

    home, root = tmp_path / "home", write_sphinx_tree(tmp_path / "site")
    added = cove(home, "docs", "add", "site", str(root), "--exclude", "library/sys.html", "--no-embed")
    assert added.returncode == 0, added.stderr
    first = added.stdout.splitlines()[0]
    assert first.startswith("site: 4 files indexed, 23 left out (21 by pattern, 2 not a type Cove reads), ")
    assert "`cove docs status site --files` lists the files left out, with why" in added.stdout

    listed = cove(home, "docs", "status", "site", "--files")
    assert listed.returncode == 0, listed.stderr
    expected = {**LEFT_OUT, "library/sys.html": "is left out by the pattern `library/sys.html`"}
    for relative, sentence in expected.items():  # every one, with why
        assert f"    {root / relative}: {sentence}" in listed.stdout.splitlines(), relative
    status = json.loads(cove(home, "docs", "status", "site", "--json").stdout)
    assert {Path(p["path"]).relative_to(root).as_posix(): p["sentence"] for p in status["left_out"]} == expected
    assert status["left_out_files"] == {"total": 23, "by_pattern": 21, "not_read_type": 2}
    assert status["include"] == [] and status["exclude"] == [*DEFAULT_EXCLUDES, "library/sys.html"]

    # A bad pattern gets a sentence, and the collection is as it was.
    for bad, fragment in (("/usr/share/doc", "is an absolute path"), ("", "an empty pattern matches nothing")):
        line = assert_clean_error(cove(home, "docs", "patterns", "site", "--exclude", bad))
        assert fragment in line, line
    assert "is an absolute path" in assert_clean_error(cove(home, "docs", "add", "other", str(root), "--exclude", "/etc"))
    assert "other" not in cove(home, "docs", "list").stdout  # not made
    assert json.loads(cove(home, "docs", "status", "site", "--json").stdout) == status

    # New patterns: stored (each command is a new process), followed, and what they leave out leaves the index.
    changed = cove(home, "docs", "patterns", "site", "--include", "*.html", "--no-default-excludes")
    assert changed.returncode == 0, changed.stderr
    assert "  include: *.html" in changed.stderr and "  exclude: nothing (the default excludes are dropped)" in changed.stderr
    shown = cove(home, "docs", "patterns", "site").stdout
    assert "  include: *.html" in shown
    status = json.loads(cove(home, "docs", "status", "site", "--json").stdout)
    assert status["files_indexed"] == 7  # the pages, with Sphinx's indexes now
    assert status["include"] == ["*.html"] and status["exclude"] == []
    left = {Path(p["path"]).relative_to(root).as_posix(): p["sentence"] for p in status["left_out"]}
    assert left["notes/build.md"] == "is left out: it matches none of the include patterns (`*.html`)"

    # The defaults again, and `--no-default-excludes` on add: Sphinx's copies are indexed.
    assert cove(home, "docs", "patterns", "site", "--defaults").returncode == 0
    back = json.loads(cove(home, "docs", "status", "site", "--json").stdout)
    assert back["files_indexed"] == len(KEPT) and back["include"] == [] and back["exclude"] == list(DEFAULT_EXCLUDES)
    shown = cove(home, "docs", "patterns", "site").stdout
    assert "  exclude: _sources/  (default: Sphinx's copies of each page's reST source; the page itself is indexed)" in shown
    everything = cove(home, "docs", "add", "all", str(root), "--no-default-excludes")
    assert everything.returncode == 0, everything.stderr
    assert json.loads(cove(home, "docs", "search", "all", SOURCE_ONLY, "--json").stdout)
    assert json.loads(cove(home, "docs", "search", "site", SOURCE_ONLY, "--json").stdout) == []
