"""Which embedder a collection is indexed and searched with: the model its vectors already come
from (when it is still installed), else, for a collection without vectors, the installed embedding
model (app/docs/embedding.embedding_model); None means keyword search only. Used by `cove docs`,
`cove chat --docs` and the window alike. Reads the library: call it on the history's thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.docs.embedding import EMBED_NICE, QUERY_NICE, EngineEmbedder, embedding_model
from app.docs.index_db import CollectionInfo
from models.library import ModelLibrary, ModelNotFound


@dataclass
class EmbedderChoice:
    embedder: EngineEmbedder | None
    note: str | None = None  # a sentence for the person when the collection's model is gone

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()


def choose_embedder(library: ModelLibrary, settings: Any, info: CollectionInfo | None, *, allow_new: bool = True) -> EmbedderChoice:
    """The embedder for `info` (None: a collection about to be made). `allow_new`: a collection
    without vectors may take the installed embedding model (indexing, in a niced host); searching
    (`allow_new` False) never starts one, and embeds the question at normal priority."""
    nice = EMBED_NICE if allow_new else QUERY_NICE
    if info is not None and info.embedding_model:
        try:
            return EmbedderChoice(EngineEmbedder(library.get(info.embedding_model), nice=nice))
        except ModelNotFound:
            return EmbedderChoice(
                None,
                f"{info.name}'s passages were embedded with {info.embedding_model}, which is no "
                "longer installed, so it is searched by keywords only",
            )
    if not allow_new:
        return EmbedderChoice(None)
    model = embedding_model(library, settings)
    return EmbedderChoice(EngineEmbedder(model, nice=nice) if model is not None else None)
