"""Which embedding model a collection is indexed and searched with, one rule for `cove docs`,
`cove chat --docs` and the window alike (`collection_model`):

- a collection is embedded and searched with the model its vectors come from while that model is
  installed, whatever is chosen for new collections;
- a new collection, or one without vectors, takes the chosen model (app/docs/embedding.py
  `embedding_model`: the setting, else the default embedder, else the first by name);
- it moves to another model only when the person says so (`move_to`: `cove docs reindex NAME
  --embedder MODEL`, or yes in the window): the indexer then drops its old vectors and embeds it
  again, and it is searched by keywords meanwhile;
- when its model is no longer installed, it is searched by keywords only (with a sentence) until
  its next index run embeds it again with the chosen model.

Also here: naming an installed embedding model (`find_embedding_model`, one sentence when the name is
not one) and keeping the person's choice in the settings (`save_choice`). Everything here that
reads the library runs on the history's thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.docs.embedding import EMBED_NICE, QUERY_NICE, EngineEmbedder, embedding_models, pick_embedding_model
from app.docs.index_db import CollectionInfo
from app.settings import save_settings
from models.library import InstalledModel, ModelLibrary, ModelNotFound


class NotAnEmbeddingModel(ValueError):
    """The name given is not an installed embedding model; the message is one sentence."""


@dataclass
class EmbedderChoice:
    embedder: EngineEmbedder | None
    note: str | None = None  # a sentence for the person when the collection's model is gone

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()


@dataclass(frozen=True)
class ModelFor:
    """What `collection_model` decided: the model (None: keywords only) and a sentence, if any."""

    model: InstalledModel | None
    note: str | None = None


def gone_note(name: str, model: str, then: str = "so it is searched by keywords only") -> str:
    """The sentence for a collection whose model is no longer installed."""
    return f"{name}'s passages were embedded with {model}, which is no longer installed, {then}"


def collection_model(
    info: CollectionInfo | None,
    installed: Sequence[InstalledModel],
    chosen: InstalledModel | None,
    *,
    indexing: bool,
    move_to: InstalledModel | None = None,
) -> ModelFor:
    """The rule (see the module's docstring). `info`: the collection (None: one about to be made);
    `installed`: the installed embedding models; `chosen`: the one new collections take;
    `indexing`: False for a search, which never starts embedding a collection; `move_to`: the model
    the person moves the collection to (indexing only)."""
    if indexing and move_to is not None:
        return ModelFor(move_to)
    own = info.embedding_model if info is not None else None
    if own:
        for model in installed:
            if model.name == own:
                return ModelFor(model)
        assert info is not None
        if not indexing or chosen is None:
            return ModelFor(None, gone_note(info.name, own))
        return ModelFor(chosen, gone_note(info.name, own, f"so it is embedded again with {chosen.name}"))
    return ModelFor(chosen if indexing else None)


def choose_embedder(
    library: ModelLibrary, settings: Any, info: CollectionInfo | None, *, allow_new: bool = True, move_to: InstalledModel | None = None
) -> EmbedderChoice:
    """The embedder for `info` (None: a collection about to be made) by `collection_model`.
    `allow_new` True: indexing, in a niced host (EMBED_NICE); False: searching, which never starts
    embedding a collection and embeds the question at normal priority (QUERY_NICE)."""
    found = embedding_models(library)
    decided = collection_model(
        info, found, pick_embedding_model(found, getattr(settings, "embedding_model", None)), indexing=allow_new, move_to=move_to
    )
    nice = EMBED_NICE if allow_new else QUERY_NICE
    return EmbedderChoice(EngineEmbedder(decided.model, nice=nice) if decided.model is not None else None, decided.note)


def search_model(infos: Sequence[CollectionInfo], installed: Sequence[InstalledModel]) -> ModelFor:
    """The model a search of several collections embeds its question with: that of the first
    collection whose model is installed (the others are searched by keywords; vectors of two models
    are never compared); the note names the collections whose model is gone."""
    found: InstalledModel | None = None
    notes: list[str] = []
    for info in infos:
        decided = collection_model(info, installed, None, indexing=False)
        found = found or decided.model
        if decided.note:
            notes.append(decided.note)
    return ModelFor(found, "; ".join(notes) or None)


def choose_search_embedder(library: ModelLibrary, infos: Sequence[CollectionInfo]) -> EmbedderChoice:
    """The searching embedder (QUERY_NICE) for a search of `infos` (`search_model`)."""
    decided = search_model(infos, embedding_models(library))
    return EmbedderChoice(EngineEmbedder(decided.model, nice=QUERY_NICE) if decided.model is not None else None, decided.note)


def find_embedding_model(library: ModelLibrary, name: str) -> InstalledModel:
    """The installed embedding model called `name` (as `cove models` names it). Raises
    NotAnEmbeddingModel with one sentence that names the installed embedding models."""
    found = embedding_models(library)
    try:
        model = library.get(name)
    except ModelNotFound:
        model = None
    if model is not None and any(m.path == model.path and m.name == model.name for m in found):
        return model
    what = f"{name} is a chat model, not an embedding model" if model is not None else f"no embedding model named {name} is installed"
    raise NotAnEmbeddingModel(f"{what}; {installed_sentence(found)}")


def installed_sentence(found: Sequence[InstalledModel]) -> str:
    """'the installed embedding models are a and b' (or the one, or that none is and how to get one)."""
    names = [m.name for m in found]
    if not names:
        return "no embedding model is installed (`cove setup` gets all-MiniLM-L6-v2)"
    if len(names) == 1:
        return f"the installed embedding model is {names[0]}"
    return f"the installed embedding models are {', '.join(names[:-1])} and {names[-1]}"


def save_choice(core: Any, name: str) -> str | None:
    """Keep `name` as the embedding model new collections take (the settings file). Returns None,
    or a sentence when it cannot be saved."""
    if core.read_only:
        return "Cove's data folder is read-only, so the choice of embedding model cannot be saved"
    try:
        save_settings(core.paths.settings_file, replace(core.settings, embedding_model=name))
    except OSError as exc:
        return f"the choice of embedding model could not be saved: {exc.strerror or exc}"
    return None
