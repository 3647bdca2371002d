"""`cove docs`: the person's document collections from the terminal: add folders or files (and
index them), which files are indexed (include and exclude patterns), list, status (with every file
left out and why), reindex (and move to another embedding model), remove, search (the passages a
chat would be given), and which embedding model new collections use (app/cli/docs_embedder.py).
Nothing here changes, moves or copies a document; the index is documents.db beside the history.
What a document holds (its path, headings, text) reaches the terminal through the terminal-text
rule (app/cli/terminal_text.py), its JSON included."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli import docs_embedder
from app.cli.output import positive_int
from app.cli.terminal_text import for_terminal, print_json_for, say

if TYPE_CHECKING:
    from app.core import Core
    from app.docs.index_db import CollectionInfo, CollectionStatus, DocumentIndex
    from app.docs.patterns import Patterns
    from app.docs.types import Progress
    from models.library import InstalledModel

EXCERPT_CHARS = 300
PATTERN_HELP = (
    "Patterns are globs over paths from each folder given: a name (`_sources`, `*.min.js`) matches at any depth, "
    "one with / (`library/old`) from the folder, ** spans folders, a trailing / matches folders only. "
    "By default Cove leaves out build output and copies (Sphinx's _sources and _static, searchindex.js, minified "
    "scripts, .git, node_modules, virtual environments; `cove docs patterns NAME` lists them)."
)


def _pattern_arguments(parser: argparse.ArgumentParser, note: str) -> None:
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="index only files matching it (repeat for more; e.g. '*.html')" + (f"; {note}" if note else ""),
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out what matches it, besides the defaults (repeat)",
    )
    parser.add_argument("--no-default-excludes", action="store_true", help="drop the default excludes (keep only yours)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "docs",
        help="your document collections: add, list, status, patterns, reindex, remove, search, embedder",
        description="A collection is a named set of folders and files. Cove reads them (text, Markdown, "
        "HTML, PDF, DOCX, source code) into an index beside the history and never changes them.",
    )
    dsub = p.add_subparsers(dest="docs_command", metavar="COMMAND", required=True)
    add = dsub.add_parser(
        "add",
        help="make a collection (or add to one) and index it",
        description="Make a collection of folders and files (or add them to one) and index it. " + PATTERN_HELP,
    )
    add.add_argument("name")
    add.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="folders or files")
    _pattern_arguments(add, "on an existing collection, these replace its patterns")
    add.add_argument("--no-embed", action="store_true", help="keyword search only, even with an embedding model installed")
    add.add_argument("--files", action="store_true", help="list every file left out, with why")
    add.set_defaults(docs_run=run_add)
    patterns = dsub.add_parser(
        "patterns",
        help="show or change which files of a collection are indexed (include and exclude patterns)",
        description="Without options: the collection's patterns. With them: its new patterns (what is not given goes "
        "back to the default: every file Cove reads, the default excludes), then it is indexed again. " + PATTERN_HELP,
    )
    patterns.add_argument("name")
    _pattern_arguments(patterns, "")
    patterns.add_argument("--defaults", action="store_true", help="back to the defaults: no include patterns, the default excludes")
    patterns.add_argument("--no-embed", action="store_true", help="do not embed passages when it is indexed again")
    patterns.set_defaults(docs_run=run_patterns)
    dsub.add_parser("list", help="the collections, with their files and passages").set_defaults(docs_run=run_list)
    status = dsub.add_parser("status", help="one collection: folders, counts, files left out or with a note (not readable or cut)")
    status.add_argument("name")
    status.add_argument("--json", action="store_true", help="print one JSON object (every file left out included)")
    status.add_argument("--files", action="store_true", help="list every file left out, with why")
    status.set_defaults(docs_run=run_status)
    reindex = dsub.add_parser("reindex", help="read new and changed files again, drop deleted ones (--embedder: move to another model)")
    reindex.add_argument("name")
    reindex.add_argument("--no-embed", action="store_true", help="do not embed passages this run")
    reindex.add_argument(
        "--embedder",
        metavar="MODEL",
        help="move the collection to this embedding model: its vectors are dropped and its passages embedded again "
        "(it is searched by keywords meanwhile)",
    )
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
    docs_embedder.add_parser(dsub, docs_embedder.run_embedder)
    p.set_defaults(run=run)


def run(core: Core, args: argparse.Namespace) -> int:
    return int(args.docs_run(core, args))


def _index(core: Core) -> DocumentIndex:
    from app.docs.index_db import DocumentIndex

    index = DocumentIndex(core.paths.documents_database)
    if index.notice:
        say(f"cove: {index.notice}", sys.stderr)
    return index


def _asked_patterns(args: argparse.Namespace) -> Patterns | None:
    """The patterns the options ask for (BadPattern with a sentence), or None when none were given."""
    from app.docs.patterns import person_patterns
    from app.docs.readers import SUFFIXES

    if not (args.include or args.exclude or args.no_default_excludes):
        return None
    return person_patterns(args.include, args.exclude, default_excludes=not args.no_default_excludes, supported=SUFFIXES)


def run_add(core: Core, args: argparse.Namespace) -> int:
    roots = [Path(p).expanduser().absolute() for p in args.paths]
    asked = _asked_patterns(args)  # checked before anything is written: a bad pattern changes nothing
    include, exclude = asked.for_storage() if asked is not None else (None, None)
    with _index(core) as index:
        if index.collection(args.name) is None:
            index.create(args.name, roots, include=include, exclude=exclude)
            say(f"Made the collection {args.name}.", sys.stderr)
        else:
            index.add_roots(args.name, roots)
            if asked is not None:
                index.set_patterns(args.name, include=include, exclude=exclude)
                say(f"The patterns of {args.name} are now the ones given.", sys.stderr)
    return _reindex(core, args.name, embed=not args.no_embed, files=args.files)


def run_patterns(core: Core, args: argparse.Namespace) -> int:
    from app.docs.patterns import Patterns

    asked = Patterns() if args.defaults else _asked_patterns(args)
    with _index(core) as index:
        info = index.require(args.name)
        if asked is None:
            _print_patterns(info, sys.stdout)
            return 0
        include, exclude = asked.for_storage()
        index.set_patterns(args.name, include=include, exclude=exclude)
        _print_patterns(index.require(args.name), sys.stderr)
    return _reindex(core, args.name, embed=not args.no_embed)


def _print_patterns(info: CollectionInfo, out: Any) -> None:
    from app.docs.patterns import WHY_DEFAULT, Patterns

    patterns = Patterns.stored(info.include, info.exclude)
    say(f"Which files of {info.name} are indexed (patterns match paths from each of its folders):", out)
    if not patterns.include:
        say("  include: every file Cove reads", out)
    for pattern in patterns.include:
        say(f"  include: {pattern}", out)
    if not patterns.exclude:
        say("  exclude: nothing (the default excludes are dropped)", out)
    for pattern in patterns.exclude:
        why = WHY_DEFAULT.get(pattern)
        say(f"  exclude: {pattern}" + (f"  (default: {why})" if why else ""), out)


def run_reindex(core: Core, args: argparse.Namespace) -> int:
    from app.docs.embedder_choice import find_embedding_model

    if args.embedder is not None and args.no_embed:
        say("cove: --embedder moves the collection to a model and --no-embed embeds nothing; give one of them.", sys.stderr)
        return 1
    with _index(core) as index:
        info = index.require(args.name)
    if args.embedder is None:
        return _reindex(core, args.name, embed=not args.no_embed)
    model = find_embedding_model(core.library, args.embedder)  # NotAnEmbeddingModel: one sentence
    if info.embedding_model and info.embedding_model != model.name:
        say(
            f"Moving {args.name} from {info.embedding_model} to {model.name}: its passages are embedded again, "
            "and it is searched by keywords meanwhile.",
            sys.stderr,
        )
    return _reindex(core, args.name, embed=True, move_to=model)


NO_EMBEDDER = (
    "no embedding model is installed, so {name} is searched by keywords only; "
    "`cove setup` gets all-MiniLM-L6-v2 (83 MB), which finds passages by meaning too"
)


def _reindex(core: Core, name: str, *, embed: bool, files: bool = False, move_to: InstalledModel | None = None) -> int:
    """Index `name` with the embedder the rule gives it (app/docs/embedder_choice.py); `move_to`:
    the embedding model the person moves it to."""
    from app.docs.embedder_choice import EmbedderChoice, choose_embedder
    from app.docs.indexer import index_collection

    with _index(core) as index:
        info = index.require(name)
    choice = choose_embedder(core.library, core.settings, info, move_to=move_to) if embed else EmbedderChoice(None)
    if choice.note:
        say(f"cove: {choice.note}", sys.stderr)
    elif embed and choice.embedder is None and not info.embedding_model:
        say(f"cove: {NO_EMBEDDER.format(name=name)}", sys.stderr)
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
    _print_status(status, sys.stdout, files=files)
    return 0 if progress.finished else 1


class _ProgressLine:
    """Indexing progress on stderr: one line redrawn on a terminal, a line every 50 files (and
    every 10% of the passages embedded) otherwise."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._drawn = False
        self._last_done = -1
        self._last_tenth = -1

    def __call__(self, progress: Progress) -> None:
        if progress.vectors_total:
            self._embedding(progress)
            return
        if progress.files_total == 0 or progress.files_done == self._last_done and not self._tty:
            return
        line = f"indexing {progress.collection}: {progress.files_done}/{_n(progress.files_total, 'file')}"
        if progress.current:
            line += f" ({Path(progress.current).name}" + (f", page {progress.page} of {progress.pages}" if progress.pages else "") + ")"
        if self._tty:
            sys.stderr.write("\r" + for_terminal(line[:150], sys.stderr).ljust(150))
            sys.stderr.flush()
            self._drawn = True
        elif progress.files_done % 50 == 0 or progress.files_done == progress.files_total:
            say(line, sys.stderr)
        self._last_done = progress.files_done

    def _embedding(self, progress: Progress) -> None:
        done, total = progress.vectors_done, progress.vectors_total
        line = f"embedding {progress.collection}: {done:,}/{_n(total, 'passage')} (searchable by keywords meanwhile)"
        if self._tty:
            sys.stderr.write("\r" + for_terminal(line[:150], sys.stderr).ljust(150))
            sys.stderr.flush()
            self._drawn = True
            return
        tenth = done * 10 // total
        if tenth != self._last_tenth:
            say(line, sys.stderr)
            self._last_tenth = tenth

    def end(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            self._drawn = False


def run_list(core: Core, args: argparse.Namespace) -> int:
    from app.docs.patterns import LeftOutCount

    with _index(core) as index:
        names = index.names()
        if not names:
            say("No collections yet. `cove docs add NAME FOLDER` makes one.", sys.stdout)
            return 0
        for name in names:
            s = index.status(name)
            problems = f", {len(s.problems)} not readable" if s.problems else ""
            left = LeftOutCount.of(s.left_out)
            problems += f", {left.files} left out" if left.files else ""
            search_by = f"keywords and meaning ({s.embedding_model})" if s.embedding_model and s.vectors else "keywords"
            say(
                f"{name}: {_n(s.files_indexed, 'file')}, {_n(s.chunks, 'passage')}{problems}; searched by {search_by}; "
                f"{', '.join(s.roots)}",
                sys.stdout,
            )
    return 0


def run_status(core: Core, args: argparse.Namespace) -> int:
    from app.docs.patterns import LeftOutCount, Patterns

    with _index(core) as index:
        status = index.status(args.name)
        info = index.require(args.name)
    if args.json:
        patterns = Patterns.stored(info.include, info.exclude)
        left = LeftOutCount.of(status.left_out)
        print_json_for(
            {
                **asdict(status),
                "left_out_files": {"total": left.files, "by_pattern": left.by_pattern, "not_read_type": left.by_type},
                "include": list(patterns.include),
                "exclude": list(patterns.exclude),
            },
            sys.stdout,
        )
    else:
        _print_status(status, sys.stdout, files=args.files)
    return 0


def _n(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


def _print_status(s: CollectionStatus, out: Any, *, files: bool = False) -> None:
    """The collection's counts, its folders, the files left out (counted; listed with `files`) and
    the files with a note (listed)."""
    from app.docs.patterns import LeftOutCount

    left = LeftOutCount.of(s.left_out)
    say(
        f"{s.name}: {_n(s.files_indexed, 'file')} indexed"
        + (f", {left.sentence()}" if left.files else "")
        + f", {_n(s.chunks, 'passage')}"
        + (f", {s.vectors} embedded with {s.embedding_model}" if s.embedding_model else ", keyword search only")
        + (f"; {_n(s.pending, 'file')} still to read" if s.pending else "")
        + (f"; last indexed {s.last_indexed}" if s.last_indexed else ""),
        out,
    )
    for root in s.roots:
        say(f"  folder or file: {root}", out)
    if s.left_out and files:
        say(f"  left out, with why ({_n(len(s.left_out), 'file or folder', 'files or folders')}):", out)
        for left_out in s.left_out:
            say(f"    {left_out.path}: {left_out.sentence}", out)
    elif s.left_out:
        name = shlex.quote(s.name)
        say(f"  `cove docs status {name} --files` lists the files left out, with why; `cove docs patterns {name}` shows the patterns", out)
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
    from app.docs.embedder_choice import choose_search_embedder
    from app.docs.search import search

    names = [n.strip() for n in args.name.split(",") if n.strip()]
    with _index(core) as index:
        infos = [index.require(name) for name in names]
        choice = choose_search_embedder(core.library, infos)
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
