"""What a GGUF's metadata says about embedding: the pooling type it declares, and the sentence for a
model that cannot embed. Pure (no llama_cpp), so the parent (app/docs) and the host both read it."""

from __future__ import annotations

from collections.abc import Mapping

POOLING_NAMES = {1: "mean", 2: "cls", 3: "last"}  # gguf.PoolingType values that give one vector per text


def declared_pooling(metadata: Mapping[str, str], architecture: str) -> int | None:
    """The pooling type a GGUF declares (`<arch>.pooling_type`) if it gives one vector per text, else None."""
    raw = metadata.get(f"{architecture}.pooling_type")
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value in POOLING_NAMES else None


def not_an_embedding_model(name: str, metadata: Mapping[str, str], architecture: str) -> str:
    """The sentence for a model that cannot embed."""
    raw = metadata.get(f"{architecture}.pooling_type")
    if raw == "4":
        return f"{name} is a reranking model: it scores pairs of texts rather than embedding them"
    return f"{name} is not an embedding model: its file declares no pooling type"
