"""`cove docs embedder [MODEL]`: the installed embedding models (size, dimensions, which one new
collections take and which collections use each), and choosing the one new collections take (kept
in the settings). A collection stays on the model its vectors come from (app/docs/embedder_choice.py);
`cove docs reindex NAME --embedder MODEL` moves it, and this command names that command for each
collection still on another model."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any

from app.cli.output import human_size
from app.cli.terminal_text import print_json_for, say

if TYPE_CHECKING:
    from app.core import Core
    from models.library import InstalledModel


def add_parser(dsub: argparse._SubParsersAction, run: Any) -> None:
    """The `embedder` subcommand of `cove docs`; `run` is what it runs (run_embedder)."""
    p = dsub.add_parser(
        "embedder",
        help="the installed embedding models, and which one new collections use",
        description="Without MODEL: the installed embedding models, which one new collections are embedded with and "
        "which collections use each. With MODEL: new collections are embedded with it (kept in the settings); a "
        "collection stays on the model it was embedded with until `cove docs reindex NAME --embedder MODEL` moves it.",
    )
    p.add_argument("model", nargs="?", metavar="MODEL", help="the embedding model new collections use from now on")
    p.add_argument("--json", action="store_true", help="print the list as one JSON object")
    p.set_defaults(docs_run=run)


def run_embedder(core: Core, args: argparse.Namespace) -> int:
    from app.docs.embedder_choice import find_embedding_model, save_choice

    if args.model is None:
        return _print_list(core, json_out=args.json)
    model = find_embedding_model(core.library, args.model)  # NotAnEmbeddingModel: one sentence
    problem = save_choice(core, model.name)
    if problem:
        say(f"cove: {problem}", sys.stderr)
        return 1
    if args.json:
        return _print_list(core, json_out=True)
    say(f"New collections are now embedded with {model.name}.", sys.stdout)
    others = {name: used for name, used in _collections(core).items() if used and used != model.name}
    if others:
        still = "uses another model; to move it" if len(others) == 1 else "use another model; to move one"
        say(
            f"{_and(sorted(others))} still {still} to {model.name} "
            "(its passages are embedded again, and it is searched by keywords meanwhile):",
            sys.stdout,
        )
        for name in sorted(others):
            say(f"  cove docs reindex {shlex.quote(name)} --embedder {shlex.quote(model.name)}    (now {others[name]})", sys.stdout)
    return 0


def _collections(core: Core) -> dict[str, str | None]:
    """Each collection's embedding model (None: keywords only so far); no index file is made."""
    from app.docs.index_db import DocumentIndex

    if not core.paths.documents_database.exists():
        return {}
    with DocumentIndex(core.paths.documents_database) as index:
        return {name: info.embedding_model for name in index.names() if (info := index.collection(name)) is not None}


def dimensions(model: InstalledModel) -> int | None:
    """The length of the model's vectors, from its file's header (None when it cannot be read)."""
    from models.gguf_errors import InvalidModelFile
    from models.gguf_validate import read_gguf_header

    try:
        meta = read_gguf_header(model.path).metadata
    except (InvalidModelFile, OSError):
        return None
    value = meta.get(f"{meta.get('general.architecture', '')}.embedding_length")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _print_list(core: Core, *, json_out: bool) -> int:
    from app.docs.embedding import DEFAULT_EMBEDDER, embedding_models, pick_embedding_model

    found = embedding_models(core.library)
    wanted = core.settings.embedding_model
    chosen = pick_embedding_model(found, wanted)
    used = _collections(core)
    by_model: dict[str, list[str]] = {}
    for name, model_name in used.items():
        if model_name:
            by_model.setdefault(model_name, []).append(name)
    installed = {m.name for m in found}
    gone = {model: names for model, names in by_model.items() if model not in installed}
    rows = [(m, dimensions(m)) for m in found]
    if json_out:
        print_json_for(
            {
                "new_collections": chosen.name if chosen is not None else None,
                "chosen": wanted,
                "models": [
                    {
                        "name": m.name,
                        "size": m.size,
                        "dimensions": dims,
                        "path": m.path,
                        "new_collections": chosen is not None and m.name == chosen.name,
                        "collections": sorted(by_model.get(m.name, [])),
                    }
                    for m, dims in rows
                ],
                "not_installed": [{"model": model, "collections": sorted(names)} for model, names in sorted(gone.items())],
            },
            sys.stdout,
        )
        return 0
    if chosen is None:
        say("No embedding model is installed, so documents are searched by keywords only; `cove setup` gets all-MiniLM-L6-v2.", sys.stdout)
    else:
        why = "your choice" if chosen.name == wanted else "the default" if chosen.name == DEFAULT_EMBEDDER else "the first installed"
        say(f"Embedding models installed; new collections are embedded with {chosen.name} ({why}):", sys.stdout)
        if wanted and wanted != chosen.name:
            say(f"  (your choice, {wanted}, is not installed as an embedding model)", sys.stdout)
    width = max((len(m.name) for m, _ in rows), default=0)
    for m, dims in rows:
        mark = "*" if chosen is not None and m.name == chosen.name else " "
        facts = human_size(m.size) + (f", {dims} dimensions" if dims else "")
        names = sorted(by_model.get(m.name, []))
        uses = f"used by {', '.join(names)}" if names else "used by no collection"
        say(f"{mark} {m.name.ljust(width)}  {facts}; {uses}", sys.stdout)
    for model, names in sorted(gone.items()):
        say(
            f"  {', '.join(sorted(names))}: embedded with {model}, which is no longer installed; searched by keywords "
            "until `cove docs reindex` embeds it with the model new collections use",
            sys.stdout,
        )
    if found:
        say(
            "`cove docs embedder MODEL` chooses the model for new collections; "
            "`cove docs reindex NAME --embedder MODEL` moves a collection to it.",
            sys.stdout,
        )
    return 0


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
