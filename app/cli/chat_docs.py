"""`cove chat --docs NAME`: the conversation's document collections for the command line's turns
(attached to the conversation, so later turns and the window keep them), and the sources printed
under a reply: those it cites, or, when it cites none, the passages it was given, said as such."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.terminal_text import say
from app.docs.embedder_choice import choose_search_embedder
from app.docs.for_turn import turn_documents
from app.docs.index_db import DocumentIndex
from app.docs.turn_sources import TurnDocuments
from app.remote.remote_model import RemoteModel
from app.settings import SamplingParams
from app.store.sources import Source, attach_collections, attached_collections
from models.library import InstalledModel

if TYPE_CHECKING:
    from app.core import Core


@contextlib.contextmanager
def chat_documents(
    core: Core, conversation_id: str, wanted: list[str], model: InstalledModel | RemoteModel, params: SamplingParams
) -> Iterator[TurnDocuments | None]:
    """The documents of this run's turns: `wanted` (--docs) attached to the conversation first, then
    every collection the conversation has. None when it has none. Unknown names are refused before
    anything is sent."""
    names = attached_collections(core.db, conversation_id)
    if wanted:
        with DocumentIndex(core.paths.documents_database) as index:
            for name in wanted:
                index.require(name)
        names = list(dict.fromkeys([*names, *wanted]))
        attach_collections(core.db, conversation_id, names)
    if not names:
        yield None
        return
    with DocumentIndex(core.paths.documents_database) as index:
        present = [name for name in names if index.collection(name) is not None]
        gone = [name for name in names if name not in present]
        infos = [info for info in (index.collection(name) for name in present) if info is not None]
    if gone:
        say(
            f"cove: the collection{'s' if len(gone) > 1 else ''} {', '.join(gone)} attached to this conversation "
            "no longer exist; the reply searches the others",
            sys.stderr,
        )
    if not present:
        yield None
        return
    choice = choose_search_embedder(core.library, infos)
    if choice.note:
        say(f"cove: {choice.note}", sys.stderr)
    try:
        yield turn_documents(
            core.paths.documents_database,
            present,
            params=params,
            embedder=lambda: choice.embedder,
            context_length=model.context_length if isinstance(model, InstalledModel) else None,
        )
    finally:
        choice.close()


def sources_json(sources: list[Source]) -> list[dict[str, Any]]:
    return [{**asdict(s), "where": s.where} for s in sources]


def print_sources(sources: list[Source], docs: TurnDocuments | None) -> None:
    """Under the reply, on stderr: its cited sources, or the passages it was given, labelled."""
    if docs is not None and docs.problem:
        say(f"cove: {docs.problem}", sys.stderr)
    if not sources:
        if docs is not None and docs.problem is None:
            say(f"[no passage of {', '.join(docs.names)} matched this message]", sys.stderr)
        return
    cited = [s for s in sources if s.cited]
    say("Sources:" if cited else "Passages the model was given (the reply cites none of them):", sys.stderr)
    for s in cited or sources:
        where = f", {s.where}" if s.where else ""
        say(f"  [{s.n}] {Path(s.path).name}{where}  ({s.path})", sys.stderr)
