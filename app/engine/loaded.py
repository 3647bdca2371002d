"""What the parent knows of the model its engine host holds: the settings it was loaded with, what
the host reported (`LoadedModel`), and the answer to an embedding request (`Embeddings`).

Plain frozen dataclasses, no native code: the window, the command line and the API server read them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from app.engine.protocol import Loaded


@dataclass(frozen=True)
class LoadedModel:
    path: str
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    n_gpu_layers: int
    backend: str
    template_source: str
    template_note: str
    load_ms: float
    n_batch: int = 0
    n_ubatch: int = 0
    flash_attn: str = "auto"
    architecture: str = ""
    n_vocab: int = 0
    placement: dict[str, Any] = field(default_factory=dict)  # where the layers and KV cache went (PlacementReport)
    embeddings: bool = False  # the file declares a pooling type: EngineClient.embed() works
    type_k: str = "f16"
    type_v: str = "f16"
    kv_bytes: int = 0  # the KV cache buffers llama.cpp allocated (0: not reported)
    compute_bytes: int = 0
    draft_model: str = ""  # the draft model's file name; "" for none
    draft_note: str = ""  # why the draft model asked for is not used
    vision: bool = False  # a vision projector is loaded with the model: replies may hold images
    projector: str = ""  # its file name
    slots: int = 1  # replies the engine runs at once, each with n_ctx of its own


def loaded_model(path: str, reply: Loaded) -> LoadedModel:
    return LoadedModel(
        path=path,
        n_ctx=reply.n_ctx,
        n_ctx_train=reply.n_ctx_train,
        n_threads=reply.n_threads,
        n_gpu_layers=reply.n_gpu_layers,
        backend=reply.backend,
        template_source=reply.template_source,
        template_note=reply.template_note,
        load_ms=reply.load_ms,
        n_batch=reply.n_batch,
        n_ubatch=reply.n_ubatch,
        flash_attn=reply.flash_attn,
        architecture=reply.architecture,
        n_vocab=reply.n_vocab,
        placement=dict(reply.placement),
        embeddings=reply.embeddings,
        type_k=reply.type_k,
        type_v=reply.type_v,
        kv_bytes=reply.kv_bytes,
        compute_bytes=reply.compute_bytes,
        draft_model=reply.draft_model,
        draft_note=reply.draft_note,
        vision=reply.vision,
        projector=reply.projector,
        slots=reply.slots,
    )


@dataclass(frozen=True)
class LoadSettings:
    path: str
    n_ctx: int | None
    n_threads: int | None
    n_gpu_layers: int | None
    flash_attn: bool | None
    kv_on_gpu: bool | None
    state_cache_mb: int = 256
    type_k: str = "f16"
    type_v: str = "f16"
    draft_model_path: str | None = None
    parallel: int = 1
    mmproj_path: str | None = None
    # The file as it was at load(): a file replaced or rewritten since is loaded again, so the
    # engine never runs other bytes than the ones the reply records.
    file_stamp: tuple[int, int, int] | None = None


def file_stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # the load itself says what is wrong with the path
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]  # one unit-length (L2) vector per text, in the order given
    prompt_tokens: int  # tokens read, over all the texts
