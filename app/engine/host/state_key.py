"""The key of a loaded model's saved-state files (app/engine/host/state_files.py): everything a saved KV
state depends on, hashed, so a state file is only ever restored into exactly the same model file,
context settings and llama.cpp build. Host-internal (it reads the loaded llama_cpp.Llama).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import llama_cpp

from app.engine.host.state_files import FORMAT_VERSION, StateFiles
from app.engine.protocol import Load


def _stat(path: str) -> dict[str, int]:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "dev": st.st_dev}


def key_fields(llm: Any, req: Load) -> dict[str, Any]:
    """What a saved state of `llm` depends on (JSON-able)."""
    path = os.path.realpath(req.model_path)
    metadata = json.dumps(sorted((str(k), str(v)) for k, v in llm.metadata.items()), ensure_ascii=False)
    params = llm.context_params
    lib = getattr(llama_cpp.llama_cpp, "_lib", None)
    lib_path = getattr(lib, "_name", None)
    return {
        "format": FORMAT_VERSION,
        "model": {
            "path": path,
            **_stat(path),
            # The GGUF's own identity, already in memory: its metadata, size and parameter count.
            "metadata_sha256": hashlib.sha256(metadata.encode("utf-8", "surrogatepass")).hexdigest(),
            "n_params": int(llama_cpp.llama_model_n_params(llm.model)),
            "model_size": int(llama_cpp.llama_model_size(llm.model)),
        },
        "context": {
            "n_ctx": int(llm.n_ctx()),
            "n_batch": int(llama_cpp.llama_n_batch(llm.ctx)),
            "n_ubatch": int(llama_cpp.llama_n_ubatch(llm.ctx)),
            "type_k": req.type_k,
            "type_v": req.type_v,
            "flash_attn": req.flash_attn,
            "flash_attn_type": int(params.flash_attn_type),
            "swa_full": bool(params.swa_full),
            "n_seq_max": int(params.n_seq_max),
            "offload_kqv": bool(params.offload_kqv),
        },
        "llama": {
            "llama_cpp_python": llama_cpp.__version__,
            "libllama": _stat(lib_path) if isinstance(lib_path, str) and os.path.exists(lib_path) else None,
        },
    }


def state_key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def disk_tier(req: Load, llm: Any) -> StateFiles | None:
    """The state files of this load, or None when the Load asks for none."""
    if not req.state_dir or req.state_disk_mb <= 0:
        return None
    try:
        key = state_key(key_fields(llm, req))
    except OSError:  # the model file vanished since it was opened: nothing can be matched to it
        return None
    return StateFiles(Path(req.state_dir), req.state_disk_mb * 1024 * 1024, key)
