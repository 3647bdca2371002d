"""What the main window needs for the Models panel: the token store, the Hub worker, the
download bridge, and the panel itself (built the first time it is opened). It follows the
chat controller's model events (loading, loaded, failed, reply finished) so the panel shows
which model is in use and its measured memory, and stops the downloads when the window quits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from app.downloads import DownloadManager
from app.hub_token import TokenStore
from ui.models_panel.download_bridge import DownloadBridge
from ui.models_panel.hub_worker import HubWorker
from ui.models_panel.panel import ModelsPanel


class ModelsFeature(QObject):
    """`open(tab)` shows the panel; `shutdown()` on quit. `choose(name)` is the window's way to
    use a model for the next turn; `library_changed()` refreshes the window's model picker."""

    def __init__(
        self,
        window: QWidget,
        controller: Any,
        *,
        choose: Callable[[str], None],
        library_changed: Callable[[], None],
        offline_changed: Callable[[bool], None],
        downloads: DownloadBridge | None = None,
        token_store: TokenStore | None = None,
    ) -> None:
        super().__init__(window)
        self._window = window
        self.controller = controller
        self.core = controller.core
        self._choose, self._library_changed, self._offline_changed = choose, library_changed, offline_changed
        self.token_store = token_store or TokenStore()
        self.worker = HubWorker(self.core.network, self.token_store.get, self)
        self.downloads = downloads or DownloadBridge(DownloadManager.for_core(self.core), self.token_store.get, self)
        self.panel: ModelsPanel | None = None
        self._loaded: tuple | None = None  # (model, engine pid, n_ctx, gpu layers) of the loaded model
        self.downloads.model_installed.connect(lambda _model: library_changed())
        c = controller
        c.model_load_started.connect(lambda name: self._say(f"Loading {name}… (Cancel is beside the model picker.)"))
        c.model_loaded.connect(self._on_loaded)
        c.model_load_failed.connect(self._on_load_failed)
        c.reply_finished.connect(lambda _message: self.panel.remeasure() if self.panel and self.panel.isVisible() else None)

    def open(self, tab: str | None = None) -> ModelsPanel:
        """Show the Models panel (built on first use), on `tab` if given."""
        if self.panel is None:
            panel = ModelsPanel(self.core, self.worker, self.downloads, self.token_store, parent=self._window)
            panel.model_chosen.connect(self._choose)
            panel.models_changed.connect(self._library_changed)
            panel.offline_changed.connect(self._offline_changed)
            self.panel = panel
            self.set_current()
            if self._loaded is not None:
                panel.set_loaded(*self._loaded)
        if tab:
            self.panel.show_tab(tab)
        self.panel.show()
        self.panel.raise_()
        self.panel.activateWindow()
        return self.panel

    def set_current(self) -> None:
        """The controller's chosen model changed (or the library did): tell the panel."""
        if self.panel is not None:
            model = self.controller.model
            self.panel.set_current_model(model.name if model else None)

    def shutdown(self) -> None:
        """On quit: drop Hub answers still to come and stop running downloads within ~3 s
        (their partial files stay, and the next start offers to resume them)."""
        self.worker.close()
        self.downloads.shutdown()
        if self.panel is not None:
            self.panel.close()

    def _on_loaded(self, loaded: Any) -> None:
        model = self.controller.model
        self._loaded = (model, self.controller.engine.host_pid, loaded.n_ctx, loaded.n_gpu_layers) if model else None
        if self.panel is not None and self._loaded is not None:
            self.set_current()
            self.panel.set_loaded(*self._loaded)
            self._say(f"{model.name} is loaded and answers the next turn.")

    def _on_load_failed(self, sentence: str) -> None:
        self.set_current()  # the controller went back to the model that worked
        self._say(sentence, error=True)

    def _say(self, text: str, error: bool = False) -> None:
        if self.panel is not None:
            self.panel.show_message(text, error=error)
