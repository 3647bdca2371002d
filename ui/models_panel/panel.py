"""The Models panel (Ctrl+M): discover models (curated catalog with fit marks, Hub search, a
repo's files, the fit estimate before downloading), installed models, downloads, connections
to the person's own servers (ui/connections), and the settings (the Hub, the models folder, what
Auto learned). It coordinates the views with the HubWorker, the DownloadBridge, the importer and
the library; the views only show and ask.

Every failure is one sentence in the panel's message line or beside what failed, never a
dialog with a traceback. While Cove is offline a line says so and the network actions are off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QDialog, QLabel, QMessageBox, QTabWidget, QVBoxLayout, QWidget

from app.hub_token import TokenStore
from models.download.partial import ResumableDownload
from models.hub_files import GGUFEntry, RepoListing
from models.library import FileNotOwned, InstalledModel, ModelNotFound
from ui.connections.page import ConnectionsPage
from ui.models_panel.discover import DiscoverPage
from ui.models_panel.download_bridge import DownloadBridge, DownloadRow
from ui.models_panel.downloads_view import DownloadsView
from ui.models_panel.hub_settings import HubSettingsPage
from ui.models_panel.hub_worker import HubReply, HubWorker, MeasureRequest
from ui.models_panel.installed_view import InstalledView
from ui.models_panel.model_import import ModelImporter
from ui.models_panel.placement_dialog import PlacementDialog
from ui.theme import format_bytes, show_sentence

Confirm = Callable[[str, str], bool]  # (title, question) -> yes?
TABS = ("Discover", "Installed", "Downloads", "Connections", "Settings")


class ModelsPanel(QDialog):
    """Emits `model_chosen(name)` (use it for the next turn), `models_changed()` (the library
    or a connection's models changed), `offline_changed(bool)` and `auto_learned_changed()` (the
    person made Auto forget what it learned, in Settings)."""

    model_chosen = Signal(str)
    models_changed = Signal()
    offline_changed = Signal(bool)
    auto_learned_changed = Signal()

    def __init__(
        self,
        core: Any,
        worker: HubWorker,
        downloads: DownloadBridge,
        token_store: TokenStore,
        *,
        confirm: Confirm | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.core, self.worker, self.downloads = core, worker, downloads
        self._confirm = confirm or self._ask
        self._current: str | None = None
        self._row_states: dict[int, str] = {}  # download key -> last state shown
        self._loaded: tuple[InstalledModel, int | None, int, int] | None = None
        self.setWindowTitle("Models")
        self.setAccessibleName("Models")
        self.setObjectName("modelsPanel")

        self.offline_line = QLabel(self)
        self.offline_line.setAccessibleName("Offline notice")
        self.offline_line.setWordWrap(True)
        self.message = QLabel(self)
        self.message.setAccessibleName("Models panel message")
        self.message.setWordWrap(True)
        self.message.hide()

        self.discover = DiscoverPage(core.network, worker, self._file_state)
        self.catalog_view = self.discover.catalog_view
        self.search_view = self.discover.search_view
        self.files_view = self.discover.files_view
        self.installed_view = InstalledView()
        self.downloads_view = DownloadsView()
        self.connections_page = ConnectionsPage(core.connections, core.network)
        self.settings_page = HubSettingsPage(core, token_store)
        self.importer = ModelImporter(core.library, self)

        self.tabs = QTabWidget(self)
        self.tabs.setAccessibleName("Models sections")
        pages = (self.discover, self.installed_view, self.downloads_view, self.connections_page, self.settings_page)
        for page, title in zip(pages, TABS):
            self.tabs.addTab(page, title)
        layout = QVBoxLayout(self)
        layout.addWidget(self.offline_line)
        layout.addWidget(self.message)
        layout.addWidget(self.tabs, 1)
        self.resize(1000, 640)

        self._connect()
        self.apply_offline()
        self.refresh_installed()

    # ---- wiring ------------------------------------------------------------------------

    def _connect(self) -> None:
        w, d = self.worker, self.downloads
        w.memory_measured.connect(self._on_measured)
        self.discover.download_requested.connect(self.download)
        self.installed_view.use_requested.connect(self.model_chosen)
        self.installed_view.import_requested.connect(self.import_files)
        self.installed_view.delete_requested.connect(self.delete_model)
        self.installed_view.placement_requested.connect(self.choose_placement)
        self.importer.imported.connect(self._on_imported)
        self.importer.failed.connect(lambda s: self.show_message(s, error=True))
        d.download_changed.connect(self._on_download_changed)
        d.model_installed.connect(self._on_installed)
        v = self.downloads_view
        v.pause_requested.connect(d.pause)
        v.resume_requested.connect(lambda key: self._guard(lambda: d.resume(key)))
        v.cancel_requested.connect(d.cancel)
        v.forget_requested.connect(d.forget)
        v.use_requested.connect(self.model_chosen)
        v.resume_left_requested.connect(self.resume_left)
        v.discard_left_requested.connect(self.discard_left)
        self.settings_page.offline_changed.connect(self._on_offline_changed)
        self.settings_page.auto_learned.changed.connect(self.auto_learned_changed)
        self.connections_page.connections_changed.connect(self.models_changed)
        self.connections_page.model_chosen.connect(self.model_chosen)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.apply_offline()
        self.refresh_installed()
        self.refresh_left_unfinished()
        self.settings_page.refresh()
        self.connections_page.refresh()
        self.remeasure()

    # ---- commands ----------------------------------------------------------------------

    def show_tab(self, title: str) -> None:
        self.tabs.setCurrentIndex(TABS.index(title))

    def show_message(self, text: str, error: bool = False) -> None:
        show_sentence(self.message, text, error, self)

    def message_text(self) -> str:
        return self.message.text() if not self.message.isHidden() else ""

    def apply_offline(self) -> None:
        gate = self.core.network
        offline = gate.offline
        self.offline_line.setText(
            f"Cove is offline ({gate.offline_reason}): searching, file listings, fit estimates, downloads and your own "
            "servers are off. Installed models work as always."
            if offline
            else ""
        )
        self.offline_line.setVisible(offline)
        self.discover.set_network_allowed(not offline)

    def search(self, query: str, sort: str) -> None:
        self.discover.search(query, sort)

    def choose_repo(self, repo_id: str, prefer: str | None = None) -> None:
        self.discover.choose_repo(repo_id, prefer)

    def download(self, listing: RepoListing, entry: GGUFEntry) -> None:
        if not entry.complete:
            self.show_message(f"{entry.name} is missing parts on the Hub, so it cannot be downloaded.", error=True)
            return
        names = list(entry.filenames)  # every part, then a vision model's projector
        if self._guard(lambda: self.downloads.start(listing.repo_id, names, listing.commit, label=entry.name)):
            sees = " with its vision projector" if entry.vision else ""
            self.show_message(f"Downloading {entry.name}{sees} ({format_bytes(entry.download_size)}); progress is under Downloads.")
        self.discover.refresh_states()

    def resume_left(self, left: ResumableDownload) -> None:
        if self._guard(lambda: self.downloads.start(left.repo, left.filenames, left.commit, label=left.filenames[0])):
            self.show_message(f"Resuming {left.filenames[0]}.")
        self.refresh_left_unfinished()

    def discard_left(self, left: ResumableDownload) -> None:
        if self._confirm(
            "Discard download",
            f"Delete the partial download of {left.filenames[0]} "
            f"({format_bytes(left.bytes_done)})? Downloading it later starts from the beginning.",
        ):
            self.downloads.discard(left)
            self.refresh_left_unfinished()

    def import_files(self, paths: list[str]) -> None:
        self.show_message(f"Checking {len(paths)} file{'s' if len(paths) > 1 else ''}…")
        self.importer.import_files(paths)

    def choose_placement(self, name: str) -> None:
        """Ask how `name` loads (GPU layers, the KV cache, flash attention, drafting) and keep the
        answer for its next load. The dialog reads the model's header off this thread."""
        try:
            model = self.core.library.get(name)
        except ModelNotFound as exc:
            self.show_message(str(exc), error=True)
            return
        dialog = PlacementDialog(
            name,
            self.core.settings.placement_for(name),
            self,
            model=model,
            candidates=self.core.library.list(),
            n_ctx=self.core.settings.sampling.n_ctx,
            machine=self.worker.machine_memory,
        )
        if dialog.exec() != PlacementDialog.DialogCode.Accepted:
            return
        if not self.core.set_placement(name, dialog.placement()):
            self.show_message("Cove's data folder is read-only: the setting cannot be saved.", error=True)
            return
        self.show_message(f"{name}: {dialog.placement().describe()}, from its next load.")

    def delete_model(self, name: str) -> None:
        try:
            model = self.core.library.get(name)
        except ModelNotFound as exc:
            self.show_message(str(exc), error=True)
            return
        in_use = {self._current, self._loaded[0].name if self._loaded else None}
        if name in in_use:
            self.show_message(f"{name} is in use; choose another model for the next turn before deleting it.", error=True)
            return
        owned = model.source in ("copied", "download", "starter") or _inside(model.path, self.core.library.models_dir)
        if owned:
            question = f"Delete {name} and its file ({format_bytes(model.size)})? This cannot be undone."
        else:
            question = f"Remove {name} from Cove's list? The file stays where it is: {model.path}"
        if not self._confirm("Delete model", question):
            return
        try:
            self.core.library.remove(name, delete_file=owned)
        except FileNotOwned:
            self.core.library.remove(name, delete_file=False)
        except OSError as exc:
            self.show_message(f"{name} could not be deleted: {exc.strerror or exc}.", error=True)
            return
        self.show_message(f"Deleted {name}." if owned else f"Removed {name} from the list; the file is still at {model.path}.")
        self.refresh_installed()
        self.models_changed.emit()

    def set_current_model(self, current: str | None) -> None:
        """The model the next turn uses (the window tells the panel)."""
        self._current = current
        self.connections_page.set_current_model(current)
        self.refresh_installed()

    def set_loaded(self, model: InstalledModel | None, pid: int | None, n_ctx: int, n_gpu_layers: int = 0) -> None:
        """A model finished loading: show its estimate beside what its engine measured."""
        self._loaded = (model, pid, n_ctx, n_gpu_layers) if model is not None else None
        self.refresh_installed()
        if model is not None:
            self._measure()

    def remeasure(self) -> None:
        """Measure the loaded model's engine again (after a reply its KV cache is in use)."""
        if self._loaded is not None:
            self._measure()

    def refresh_installed(self) -> None:
        loaded = self._loaded[0].name if self._loaded else None
        self.installed_view.set_models(self.core.library.list(), self._current, loaded)

    def refresh_left_unfinished(self) -> None:
        try:
            left = self.downloads.left_unfinished()
        except OSError:
            left = []
        self.downloads_view.set_left_unfinished(left)
        self._update_downloads_tab()

    # ---- replies and events ------------------------------------------------------------

    def _measure(self) -> None:
        if self._loaded is not None:
            model, pid, n_ctx, gpu = self._loaded
            chosen = self.core.settings.placement_for(model.name)  # the KV types and flash attention it loads with
            self.worker.measure(
                MeasureRequest(
                    model.path,
                    pid,
                    n_ctx,
                    gpu,
                    type_k=chosen.type_k,
                    type_v=chosen.type_v,
                    flash_attn=chosen.flash_attn,
                    mmproj_path=model.mmproj_path,
                )
            )

    def _on_measured(self, reply: HubReply) -> None:
        if self._loaded is None or reply.error or reply.request.path != self._loaded[0].path:
            return
        result = reply.value
        self.installed_view.set_memory(self._loaded[0].name, result.estimate, result.measured, reply.request.n_ctx)

    def _on_download_changed(self, row: DownloadRow) -> None:
        self.downloads_view.update_row(row)
        if self._row_states.get(row.key) != row.state:  # progress alone changes no file's state
            self._row_states[row.key] = row.state
            self.discover.refresh_states()
            self._update_downloads_tab()

    def _on_installed(self, model: InstalledModel) -> None:
        self.refresh_installed()
        self.discover.refresh_states()
        self.show_message(f"{model.name} is installed: choose it in the model picker, or press Use for next turn under Downloads.")
        self.models_changed.emit()

    def _on_imported(self, model: InstalledModel) -> None:
        self.refresh_installed()
        self.installed_view.select(model.name)
        self.show_message(f"Imported {model.name} ({model.quant or 'unknown quant'}, {format_bytes(model.size)}).")
        self.models_changed.emit()

    def _on_offline_changed(self, offline: bool) -> None:
        self.apply_offline()
        self.connections_page.refresh()
        self.discover.refresh_states()
        self.offline_changed.emit(offline)

    # ---- internals ---------------------------------------------------------------------

    def _file_state(self, listing: RepoListing, entry: GGUFEntry) -> str:
        """ "Downloading", "Installed" or "" for a file of the shown repo."""
        first = entry.first_file.filename
        if self.downloads.is_downloading(listing.repo_id, first):
            return "Downloading"
        # The same bytes installed from anywhere count (the listing knows each file's sha256).
        installed = self.downloads.manager.find_installed(listing.repo_id, first, sha256=entry.first_file.sha256)
        if installed is not None and (installed.vision or not entry.vision):  # without its projector: offered again
            return "Installed"
        return ""

    def _update_downloads_tab(self) -> None:
        count = self.downloads_view.active_count() + self.downloads_view.left_count()
        self.tabs.setTabText(TABS.index("Downloads"), f"Downloads ({count})" if count else "Downloads")

    def _guard(self, action: Callable[[], object]) -> bool:
        """Run `action`; a refusal (offline, already downloading, ...) becomes the message line."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - NetworkRefused, DownloadError, OSError: one sentence each
            self.show_message(str(exc) or type(exc).__name__, error=True)
            return False
        return True

    def _ask(self, title: str, question: str) -> bool:
        answer = QMessageBox.question(self, title, question)
        return answer == QMessageBox.StandardButton.Yes


def _inside(path: str, folder: Any) -> bool:
    from pathlib import Path

    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except OSError:
        return False
