"""A stand-in for the starter model's first start in window tests: the tiny model is "assembled"
once the test releases it, so the test can look at the window while the starter is prepared."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

import models.starter as starter_module


def first_start_with_starter(monkeypatch: pytest.MonkeyPatch, tiny_gguf: Path, *, wait_s: float = 20) -> threading.Event:
    """The controller's first-start path ("Preparing the starter model…", then "" once it is
    ready); set the returned event to let the assembly finish."""
    release = threading.Event()

    def prepare(models_dir: Path) -> Path:
        release.wait(wait_s)
        target = models_dir / "starter-stand-in.gguf"
        shutil.copy(tiny_gguf, target)
        return target

    monkeypatch.setattr(starter_module, "starter_available", lambda: True)
    monkeypatch.setattr(starter_module, "starter_registered", lambda library: False)
    monkeypatch.setattr(starter_module, "prepare_starter_file", prepare)
    monkeypatch.setattr(starter_module, "register_prepared_starter", lambda library, path: library.import_file(path, source="starter"))
    return release
