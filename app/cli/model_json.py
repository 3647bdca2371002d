"""How an installed model is written in the JSON of `cove models list|info|import|download`."""

from __future__ import annotations

from typing import Any

from models.library import InstalledModel


def model_dict(model: InstalledModel, last: str | None) -> dict[str, Any]:
    """The model's record; `last_used` is whether it is the model named `last`."""
    return {
        "name": model.name,
        "path": model.path,
        "quant": model.quant,
        "size": model.size,
        "architecture": model.architecture,
        "parameter_count": model.parameter_count,
        "context_length": model.context_length,
        "has_chat_template": model.has_chat_template,
        "sha256": model.sha256,
        "source": model.source,
        "repo": model.repo,
        "file": model.file,
        "added_at": model.added_at,
        "last_used_at": model.last_used_at,
        "last_used": model.name == last,
        "vision": model.vision,  # paired with a projector: it can read images
        "mmproj_path": model.mmproj_path,
        "mmproj_size": model.mmproj_size,
        "mmproj_sha256": model.mmproj_sha256,
    }
