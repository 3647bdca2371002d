"""The starter model's file for the benchmarks: assembled once into a scratch folder under the
system's temporary directory (reused by later runs)."""

from __future__ import annotations

import tempfile
from pathlib import Path


def default_model() -> str:
    from models.starter import prepare_starter_file

    folder = Path(tempfile.gettempdir()) / "cove-bench-models"
    folder.mkdir(parents=True, exist_ok=True)
    return str(prepare_starter_file(folder))
