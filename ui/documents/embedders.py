"""The window's embedders, by the one rule of app/docs/embedder_choice.py: for each embedding model
in use, one indexing EngineEmbedder (EMBED_NICE) and one searching (QUERY_NICE), made when first
asked for (a host starts on its first text); those of a model no longer installed, nor used by a
collection, nor chosen for new ones are closed at the next `refresh`, and all on `close`. So there
are at most two per embedding model installed.

Threads: `refresh` and `for_search` run on the UI thread (they read the library, or take what it
read); `for_indexing` runs on the index worker's thread: it reads the collection's model with an
index connection of its own and decides with what `refresh` last read. `move` (UI thread) asks
that a collection's next run moves it to another model."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from app.docs.embedder_choice import ModelFor, collection_model, search_model
from app.docs.embedding import EMBED_NICE, QUERY_NICE, EngineEmbedder, embedding_models, pick_embedding_model
from app.docs.index_db import CollectionInfo, DocumentIndex, DocumentIndexError
from models.library import InstalledModel, ModelLibrary


class WindowEmbedders:
    def __init__(self, index_path: Path) -> None:
        self._index_path = Path(index_path)
        self._lock = threading.Lock()
        self._installed: list[InstalledModel] = []
        self._chosen: InstalledModel | None = None
        self._moves: dict[str, str] = {}  # collection -> the model the person moved it to, until its next run takes it
        self._made: dict[tuple[str, int], EngineEmbedder] = {}  # (model name, niceness) -> its embedder
        self._paths: dict[str, str] = {}  # model name -> the file its embedders were made with
        self._closed = False

    @property
    def installed(self) -> list[InstalledModel]:
        with self._lock:
            return list(self._installed)

    @property
    def chosen(self) -> InstalledModel | None:
        """The embedding model new collections take (None: none is installed)."""
        with self._lock:
            return self._chosen

    def refresh(self, library: ModelLibrary, settings: Any, in_use: Iterable[str]) -> None:
        """Read the installed embedding models and the choice again (UI thread); close the embedders
        of a model that is gone, whose file changed, or that nothing uses (`in_use`: the
        collections' models)."""
        installed = embedding_models(library)
        chosen = pick_embedding_model(installed, getattr(settings, "embedding_model", None))
        paths = {m.name: m.path for m in installed}
        with self._lock:
            self._installed, self._chosen = installed, chosen
            keep = set(in_use) | set(self._moves.values()) | ({chosen.name} if chosen is not None else set())
            old = [key for key in self._made if key[0] not in keep or paths.get(key[0]) != self._paths.get(key[0])]
            dropped = [self._made.pop(key) for key in old]
        _close_later(dropped)

    def move(self, name: str, model: str) -> None:
        """`name`'s next index run moves it to `model` (its old vectors dropped, embedded again)."""
        with self._lock:
            self._moves[name] = model

    def for_indexing(self, name: str) -> EngineEmbedder | None:
        """The indexing embedder for `name`'s run (the worker's thread)."""
        info = self._info(name)
        with self._lock:
            move = self._moves.pop(name, None)
            to = next((m for m in self._installed if m.name == move), None)
            decided = collection_model(info, self._installed, self._chosen, indexing=True, move_to=to)
        return self._embedder(decided.model, EMBED_NICE)

    def for_search(self, infos: Sequence[CollectionInfo]) -> tuple[EngineEmbedder | None, str | None]:
        """The searching embedder for a turn over `infos`, and the sentence when a collection's model
        is gone (UI thread)."""
        with self._lock:
            decided: ModelFor = search_model(infos, self._installed)
        return self._embedder(decided.model, QUERY_NICE), decided.note

    def close(self) -> None:
        """Close every embedder (their hosts end); nothing is made after this."""
        with self._lock:
            self._closed = True
            made, self._made = list(self._made.values()), {}
        for embedder in made:
            embedder.close()

    def _embedder(self, model: InstalledModel | None, nice: int) -> EngineEmbedder | None:
        if model is None:
            return None
        with self._lock:
            if self._closed:
                return None
            key = (model.name, nice)
            made = self._made.get(key)
            if made is None:
                made = self._made[key] = EngineEmbedder(model, nice=nice)
                self._paths[model.name] = model.path
            return made

    def _info(self, name: str) -> CollectionInfo | None:
        try:
            index = DocumentIndex(self._index_path)
        except DocumentIndexError:
            return None
        try:
            return index.collection(name)
        finally:
            index.close()


def _close_later(embedders: Sequence[EngineEmbedder]) -> None:
    """Close them off the UI thread (a close waits for a batch being embedded)."""
    for embedder in embedders:
        threading.Thread(target=embedder.close, name="cove-embedder-close", daemon=True).start()
