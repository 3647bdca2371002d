"""The Discover page of the Models panel: the curated catalog (with fit marks for this
machine) or Hub search results on the left, the chosen repo's files and the chosen file's fit
estimate on the right. It runs the Hub calls through the HubWorker, keeps the remote headers
it has read (a new context size is estimated again without another request), and asks the
panel to download with `download_requested`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from models.catalog import CatalogError, load_catalog, machine_fit, machine_ram
from models.hub_files import GGUFEntry, RepoListing
from models.network import NetworkGate, NetworkRefused
from ui.models_panel.catalog_view import CatalogView
from ui.models_panel.files_view import FilesView
from ui.models_panel.hub_worker import FitRequest, HubReply, HubWorker
from ui.models_panel.search_view import SearchView

REPO_PAUSE_MS = 200  # arrowing through a list lists only the repo the person stops on


def machine_budget() -> tuple[int, int]:
    """(total RAM, VRAM) of this machine for the catalog's fit marks; VRAM 0 without a GPU."""
    ram = machine_ram()
    try:
        from models.memory_estimate import machine_memory

        vram = machine_memory().vram_total or 0
    except Exception:  # noqa: BLE001 - no GPU figure: the catalog judges by RAM alone
        vram = 0
    return ram, vram


class DiscoverPage(QWidget):
    """Emits `download_requested(RepoListing, GGUFEntry)`."""

    download_requested = Signal(object, object)

    def __init__(
        self, gate: NetworkGate, worker: HubWorker, file_state: Callable[[RepoListing, GGUFEntry], str], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.gate, self.worker = gate, worker
        self._file_state = file_state
        self._repo: str | None = None
        self._prefer: str | None = None
        self._headers: dict[tuple[str, str, str | None], Any] = {}  # remote header reads, by repo, file, commit
        self.catalog_view = CatalogView()
        self.search_view = SearchView()
        self.files_view = FilesView()
        self.files_view.set_state_provider(self._state)

        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.search_view)
        left_layout.addWidget(self.catalog_view, 1)
        self._left_layout = left_layout
        splitter = QSplitter(self)
        splitter.addWidget(left)
        splitter.addWidget(self.files_view)
        splitter.setSizes([560, 400])
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

        self._repo_timer = QTimer(self)
        self._repo_timer.setSingleShot(True)
        self._repo_timer.setInterval(REPO_PAUSE_MS)
        self._repo_timer.timeout.connect(self._list_repo)
        worker.searched.connect(self._on_searched)
        worker.files_listed.connect(self._on_files)
        worker.fit_estimated.connect(self._on_fit)
        self.catalog_view.entry_chosen.connect(lambda e: self.choose_repo(e.repo_id, e.filename))
        self.search_view.search_requested.connect(self.search)
        self.search_view.cleared.connect(lambda: self._show_search(False))
        self.search_view.repo_chosen.connect(self.choose_repo)
        self.files_view.file_chosen.connect(self._estimate)
        self.files_view.fit_settings_changed.connect(lambda: self._estimate(self.files_view.chosen()))
        self.files_view.download_requested.connect(self._download)
        self._show_search(False)
        self.load_catalog()

    # ---- commands ----------------------------------------------------------------------

    def load_catalog(self) -> None:
        try:
            entries = load_catalog()
        except CatalogError as exc:
            self.catalog_view.show_error(str(exc))
            return
        ram, vram = machine_budget()
        self.catalog_view.set_entries(entries, [machine_fit(e, ram, vram) for e in entries])

    def set_network_allowed(self, allowed: bool) -> None:
        self.search_view.set_network_allowed(allowed)
        self.files_view.set_network_allowed(allowed)
        self.files_view.refresh_states()

    def search(self, query: str, sort: str) -> None:
        self._show_search(True)
        self.search_view.set_searching(query)
        self.worker.search(query, sort)

    def choose_repo(self, repo_id: str, prefer: str | None = None) -> None:
        """Show `repo_id`'s files (after a short pause, so arrowing through a list stays quiet)."""
        listing = self.files_view.listing()
        if repo_id == self._repo and (self._repo_timer.isActive() or (listing is not None and listing.repo_id == repo_id)):
            self._prefer = prefer or self._prefer
            return
        self._repo, self._prefer = repo_id, prefer
        self.worker.cancel("files")
        self.worker.cancel("fit")
        self.files_view.set_loading(repo_id)
        self._repo_timer.start()

    def refresh_states(self) -> None:
        self.files_view.refresh_states()

    # ---- replies -----------------------------------------------------------------------

    def _on_searched(self, reply: HubReply) -> None:
        if reply.error:
            self.search_view.show_error(reply.error)
        else:
            self.search_view.set_results(reply.request.query, reply.value)

    def _list_repo(self) -> None:
        if self._repo is None:
            return
        try:
            self.gate.check("files")
        except NetworkRefused as exc:
            self.files_view.show_error(str(exc))
            return
        self.worker.list_files(self._repo)

    def _on_files(self, reply: HubReply) -> None:
        if reply.request != self._repo:
            return
        if reply.error:
            self.files_view.show_error(reply.error)
        else:
            self.files_view.set_listing(reply.value, self._prefer)

    def _estimate(self, entry: GGUFEntry | None) -> None:
        listing = self.files_view.listing()
        if entry is None or listing is None:
            return
        first = entry.first_file.filename
        request = FitRequest(
            listing.repo_id,
            first,
            entry.total_size,
            listing.commit,
            self.files_view.n_ctx(),
            self.files_view.n_gpu_layers(),
            projector_size=entry.projector.size if entry.projector else 0,
        )
        header = self._headers.get((listing.repo_id, first, listing.commit))
        if header is None:
            try:
                self.gate.check("header")
            except NetworkRefused as exc:
                self.files_view.set_fit_error(str(exc))
                return
            self.files_view.set_estimating()
        self.worker.estimate_fit(request, header)

    def _on_fit(self, reply: HubReply) -> None:
        chosen = self.files_view.chosen()
        if chosen is None or chosen.first_file.filename != reply.request.filename:
            return
        if reply.error:
            self.files_view.set_fit_error(reply.error)
            return
        result = reply.value
        self._headers[(reply.request.repo_id, reply.request.filename, reply.request.revision)] = result.header
        self.files_view.set_fit(result.estimate, getattr(result.header, "bytes_fetched", None))

    # ---- internals ---------------------------------------------------------------------

    def _download(self, entry: GGUFEntry) -> None:
        listing = self.files_view.listing()
        if listing is not None:
            self.download_requested.emit(listing, entry)

    def _state(self, entry: GGUFEntry) -> str:
        listing = self.files_view.listing()
        return self._file_state(listing, entry) if listing is not None and entry is not None else ""

    def _show_search(self, searching: bool) -> None:
        self.search_view.tree.setVisible(searching)
        self.catalog_view.setVisible(not searching)
        self._left_layout.setStretch(0, 1 if searching else 0)  # the visible list takes the height
        self._left_layout.setStretch(1, 0 if searching else 1)
        if not searching:
            self.worker.cancel("search")
            self.search_view.clear_results()
