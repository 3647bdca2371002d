"""Embeddings for documents: the Embedder the indexer and search take, the engine-backed one
(EngineEmbedder: the embedding GGUF in an engine host of its own, apart from the chat engine), and
which installed model is the embedding model.

Thread invariant: an EngineEmbedder may be called from any thread (EngineClient is thread-safe and
takes one request at a time). Indexing and searching use two: the indexer's host runs niced and
embeds batches of passages that take seconds, so a person's question is embedded by a host of its
own at normal priority (QUERY_NICE) and never waits behind a batch.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from app.engine.pooling import declared_pooling
from models.gguf_errors import InvalidModelFile

if TYPE_CHECKING:
    from app.engine.client import EngineClient
    from models.library import InstalledModel, ModelLibrary

BATCH = 16  # texts per embed call
EMBED_CTX = 2048  # the embedding host's context: the most tokens of one text (or the model's own, if smaller)
EMBED_NICE = 10  # the indexing embedder's niceness: below the window and the chat engine
QUERY_NICE = 0  # the searching embedder's: a question is a few tokens, embedded while the person waits
_TOO_LONG = re.compile(r"text (\d+) is (\d+) tokens; .* at most (\d+)")


class EmbeddingFailed(Exception):
    """The texts could not be embedded; the message is one sentence."""


class Embedder(Protocol):
    """Turns texts into unit vectors. `model_name` names the vectors' space: vectors of different
    models are never compared."""

    @property
    def model_name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order. Raises EmbeddingFailed with a sentence."""
        ...


class EngineEmbedder:
    """An Embedder on an installed embedding model, loaded in an engine host of its own on first
    use. A text longer than the model takes is cut for embedding (what is indexed stays whole)."""

    def __init__(
        self,
        model: InstalledModel,
        *,
        n_threads: int | None = None,
        n_gpu_layers: int | None = 0,
        client: EngineClient | None = None,
        nice: int = EMBED_NICE,
    ) -> None:
        """`nice`: the host's niceness, EMBED_NICE for indexing, QUERY_NICE for searching."""
        self._model = model
        self._nice = nice
        # Every core: an indexing host runs niced (EMBED_NICE), so the window and a reply's engine
        # come first, and the indexer stops asking between batches while a reply streams.
        self._n_threads = n_threads if n_threads is not None else max(1, os.cpu_count() or 1)
        self._n_gpu_layers = n_gpu_layers
        self._client = client
        self._own_client = client is None
        self._lock = threading.Lock()
        self.max_chars = 4 * EMBED_CTX  # texts are cut to this before they are sent; lowered when a text is too long

    @property
    def model_name(self) -> str:
        return self._model.name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        with self._lock:
            client = self._loaded()
            for i in range(0, len(texts), BATCH):
                out += self._embed_batch(client, [t[: self.max_chars] or " " for t in texts[i : i + BATCH]])
        return out

    @property
    def host_pid(self) -> int | None:
        """The engine host's process id once the model is loaded (diagnostics, tests)."""
        client = self._client
        return client.host_pid if client is not None else None

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._own_client:
                self._client.close()
            self._client = None

    def _loaded(self) -> EngineClient:
        from app.engine.client import EngineClient, EngineError  # imported when a model is first loaded

        if self._client is None:
            self._client = EngineClient(nice=self._nice)
        n_ctx = min(EMBED_CTX, self._model.context_length or EMBED_CTX)
        try:
            self._client.load(self._model.path, n_ctx=n_ctx, n_threads=self._n_threads, n_gpu_layers=self._n_gpu_layers, state_cache_mb=0)
        except EngineError as exc:
            raise EmbeddingFailed(f"the embedding model {self._model.name} could not be loaded: {exc}") from exc
        return self._client

    def _embed_batch(self, client: EngineClient, batch: list[str]) -> list[list[float]]:
        from app.engine.client import EngineError

        for _ in range(8):
            try:
                return client.embed(batch).vectors
            except EngineError as exc:
                m = _TOO_LONG.search(str(exc))
                if m is None:
                    raise EmbeddingFailed(f"the embedding model {self._model.name} failed: {exc}") from exc
                i, tokens, most = int(m.group(1)) - 1, int(m.group(2)), int(m.group(3))
                keep = max(1, int(len(batch[i]) * most / tokens * 0.9))
                batch[i] = batch[i][:keep]
                self.max_chars = max(64, min(self.max_chars, keep))
        raise EmbeddingFailed(f"the embedding model {self._model.name} would not take the texts, even cut short")


def is_embedding_model(path: str) -> bool:
    """Whether the GGUF at `path` declares a pooling type (one vector per text)."""
    from models.gguf_validate import read_gguf_header  # gguf (numpy): imported when a file is read

    try:
        meta = read_gguf_header(path).metadata
    except (InvalidModelFile, OSError):
        return False
    arch = str(meta.get("general.architecture", ""))
    raw = meta.get(f"{arch}.pooling_type")
    return raw is not None and declared_pooling({f"{arch}.pooling_type": str(raw)}, arch) is not None


_CACHE: dict[tuple[str, int, float], bool] = {}


def embeds(model: InstalledModel) -> bool:
    """Whether an installed model is an embedding model (its header read once per file version)."""
    key = (model.path, model.size, model.mtime)
    if key not in _CACHE:
        _CACHE[key] = is_embedding_model(model.path)
    return _CACHE[key]


# Architectures that only encode (llama.cpp's BERT family, T5's encoder): never a chat model.
ENCODER_ARCHITECTURES = frozenset(
    {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "t5encoder"}
)


def chat_models(models: Sequence[InstalledModel]) -> list[InstalledModel]:
    """The models a person chats with: every one but the embedding models. Decided without
    reading a file (the model picker is filled at start-up, and reading a large vocabulary's
    header takes a quarter of a second): by the architecture the library keeps, or by a header
    `embeds` already read."""
    return [m for m in models if not _CACHE.get((m.path, m.size, m.mtime), (m.architecture or "") in ENCODER_ARCHITECTURES)]


# The name the default embedder is installed under: models/default_embedder.MINILM_ZIP.name (not
# imported here: that module pulls in the converter; tests/app/cli/test_docs_embedder.py keeps
# the two equal).
DEFAULT_EMBEDDER = "all-minilm-l6-v2"


def embedding_models(library: ModelLibrary) -> list[InstalledModel]:
    """The installed models whose file declares a pooling type, by name (the library's order)."""
    return [m for m in library.list() if embeds(m)]


def pick_embedding_model(found: Sequence[InstalledModel], wanted: str | None) -> InstalledModel | None:
    """Among the embedding models `found` (by name): the one named `wanted` (the person's choice,
    the setting), else the default embedder, else the first. None: `found` is empty."""
    for name in (wanted, DEFAULT_EMBEDDER):
        for model in found:
            if name and model.name == name:
                return model
    return found[0] if found else None


def embedding_model(library: ModelLibrary, settings: Any = None) -> InstalledModel | None:
    """The installed embedding model new collections are embedded with: the one named by
    `settings.embedding_model` (app/settings.py) when it is installed, else the default embedder
    (DEFAULT_EMBEDDER, what `cove setup` installs) when it is installed, else the first by name.
    A name that is not an embedding model is passed over. None: no embedding model is installed."""
    return pick_embedding_model(embedding_models(library), getattr(settings, "embedding_model", None))
