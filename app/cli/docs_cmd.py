"""`cove docs`: the person's document collections from the terminal: add folders or files (and
index them), list, status, reindex, remove, and search (the passages a chat would be given).
Nothing here changes, moves or copies a document; the index is documents.db beside the history.
What a document holds (its path, headings, text) reaches the terminal through the terminal-text
rule (app/cli/terminal_text.py), its JSON included."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.output import positive_int
from app.cli.terminal_text import for_terminal, print_json_for, say

if TYPE_CHECKING:
    from app.core import Core
    from app.docs.index_db import CollectionStatus, DocumentIndex
    from app.docs.types import Progress

EXCERPT_CHARS = 300


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "docs",
        help="your document collections: add, list, status, reindex, remove, search",
        description="A collection is a named set of folders and files. Cove reads them (text, Markdown, "
        "HTML, PDF, DOCX, source code) into an index beside the history and never changes them.",
    )
    dsub = p.add_subparsers(dest="docs_command", metavar="COMMAND", required=True)
    add = dsub.add_parser("add", help="make a collection (or add to one) and index it")
    add.add_argument("name")
    add.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="folders or files")
    add.add_argument("--no-embed", action="store_true", help="keyword search only, even with an embedding model installed")
    add.set_defaults(docs_run=run_add)
    dsub.add_parser("list", help="the collections, with their files and passages").set_defaults(docs_run=run_list)
    status = dsub.add_parser("status", help="one collection: folders, counts, files with a note (left out, not readable or cut)")
    status.add_argument("name")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(docs_run=run_status)
    reindex = dsub.add_parser("reindex", help="read new and changed files again, drop deleted ones")
    reindex.add_argument("name")
    reindex.add_argument("--no-embed", action="store_true", help="do not embed passages this run")
    reindex.set_defaults(docs_run=run_reindex)
    remove = dsub.add_parser("remove", help="remove a collection from the index (your files are not touched)")
    remove.add_argument("name")
    remove.set_defaults(docs_run=run_remove)
    find = dsub.add_parser("search", help="the passages a question finds, with file, page or heading, and score")
    find.add_argument("name", help="a collection, or several separated by commas")
    find.add_argument("query")
    find.add_argument("--limit", type=positive_int, default=5, help="how many passages (default 5)")
    find.add_argument("--json", action="store_true", help="print the passages as JSON")
    find.set_defaults(docs_run=run_search)
    p.set_defaults(run=run)


def run(core: Core, args: argparse.Namespace) -> int:
    return int(args.docs_run(core, args))


def _index(core: Core) -> DocumentIndex:
    from app.docs.index_db import DocumentIndex

    index = DocumentIndex(core.paths.documents_database)
    if index.notice:
        say(f"cove: {index.notice}", sys.stderr)
    return index


def run_add(core: Core, args: argparse.Namespace) -> int:
    roots = [Path(p).expanduser().absolute() for p in args.paths]
    with _index(core) as index:
        if index.collection(args.name) is None:
            index.create(args.name, roots)
            say(f"Made the collection {args.name}.", sys.stderr)
        else:
            index.add_roots(args.name, roots)
    return _reindex(core, args.name, embed=not args.no_embed)


def run_reindex(core: Core, args: argparse.Namespace) -> int:
    with _index(core) as index:
        index.require(args.name)
    return _reindex(core, args.name, embed=not args.no_embed)


def _reindex(core: Core, name: str, *, embed: bool) -> int:
    from app.docs.embedder_choice import EmbedderChoice, choose_embedder
    from app.docs.indexer import index_collection

    with _index(core) as index:
        info = index.require(name)
    choice = choose_embedder(core.library, core.settings, info) if embed else EmbedderChoice(None)
    if choice.note:
        say(f"cove: {choice.note}", sys.stderr)
    shown = _ProgressLine()
    try:
        progress = index_collection(core.paths.documents_database, name, embedder=choice.embedder, on_progress=shown, lower_priority=False)
    except KeyboardInterrupt:
        shown.end()
        say(f"cove: indexing stopped; what was read is kept, and `cove docs reindex {name}` goes on from there", sys.stderr)
        return 130
    finally:
        choice.close()
    shown.end()
    with _index(core) as index:
        status = index.status(name)
    _print_status(status, sys.stdout)
    return 0 if progress.finished else 1


class _ProgressLine:
    """Indexing progress on stderr: one line redrawn on a terminal, a line every 50 files otherwise."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._drawn = False
        self._last_done = -1

    def __call__(self, progress: Progress) -> None:
        if progress.files_total == 0 or progress.files_done == self._last_done and not self._tty:
            return
        line = f"indexing {progress.collection}: {progress.files_done}/{_n(progress.files_total, 'file')}"
        if progress.current:
            line += f" ({Path(progress.current).name})"
        if self._tty:
            sys.stderr.write("\r" + for_terminal(line[:150], sys.stderr).ljust(150))
            sys.stderr.flush()
            self._drawn = True
        elif progress.files_done % 50 == 0 or progress.files_done == progress.files_total:
            say(line, sys.stderr)
        self._last_done = progress.files_done

    def end(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            self._drawn = False


def run_list(core: Core, args: argparse.Namespace) -> int:
    with _index(core) as index:
        names = index.names()
        if not names:
            say("No collections yet. `cove docs add NAME FOLDER` makes one.", sys.stdout)
            return 0
        for name in names:
            s = index.status(name)
            problems = f", {len(s.problems)} not readable" if s.problems else ""
            search_by = f"keywords and meaning ({s.embedding_model})" if s.embedding_model and s.vectors else "keywords"
            say(
                f"{name}: {_n(s.files_indexed, 'file')}, {_n(s.chunks, 'passage')}{problems}; searched by {search_by}; "
                f"{', '.join(s.roots)}",
                sys.stdout,
            )
    return 0


def run_status(core: Core, args: argparse.Namespace) -> int:
    with _index(core) as index:
        status = index.status(args.name)
    if args.json:
        print_json_for(asdict(status), sys.stdout)
    else:
        _print_status(status, sys.stdout)
    return 0


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _print_status(s: CollectionStatus, out: Any) -> None:
    say(
        f"{s.name}: {_n(s.files_indexed, 'file')} indexed, {_n(s.chunks, 'passage')}"
        + (f", {s.vectors} embedded with {s.embedding_model}" if s.embedding_model else ", keyword search only")
        + (f"; {_n(s.pending, 'file')} still to read" if s.pending else "")
        + (f"; last indexed {s.last_indexed}" if s.last_indexed else ""),
        out,
    )
    for root in s.roots:
        say(f"  folder or file: {root}", out)
    if s.problems:
        say(f"  {_n(len(s.problems), 'file')} with a note (left out, not readable or cut):", out)
        for problem in s.problems:
            say(f"    {problem.path}: {problem.sentence}", out)


def run_remove(core: Core, args: argparse.Namespace) -> int:
    with _index(core) as index:
        index.remove(args.name)
    say(f"Removed the collection {args.name} and its passages from the index; your files were not touched.", sys.stdout)
    return 0


def run_search(core: Core, args: argparse.Namespace) -> int:
    from app.docs.embedder_choice import choose_embedder
    from app.docs.search import search

    names = [n.strip() for n in args.name.split(",") if n.strip()]
    with _index(core) as index:
        infos = [index.require(name) for name in names]
        choice = choose_embedder(core.library, core.settings, infos[0], allow_new=False)
        if choice.note and not args.json:
            say(f"cove: {choice.note}", sys.stderr)
        try:
            found = search(index, names, args.query, limit=args.limit, embedder=choice.embedder)
        finally:
            choice.close()
    if args.json:
        print_json_for([{**asdict(p), "where": p.where} for p in found], sys.stdout)
        return 0
    if not found:
        say(f"No passage of {', '.join(names)} matches that.", sys.stdout)
        return 0
    for i, p in enumerate(found, 1):
        ranks = ", ".join(f"{what} #{rank}" for what, rank in (("keywords", p.rank_bm25), ("meaning", p.rank_vector)) if rank)
        where = f" ({p.where})" if p.where else ""
        say(f"[{i}] {p.path}{where}  score {p.score:.4f} ({ranks})", sys.stdout)
        text = " ".join(p.text.split())
        say("    " + (text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"), sys.stdout)
    return 0
