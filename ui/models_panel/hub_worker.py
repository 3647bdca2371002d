"""Runs the Models panel's slow calls off the UI thread: Hub search, a repo's file listing, a
remote header read with its fit estimate, and the estimate-versus-measured figures of the
loaded model. Results come back as queued signals; a result older than the latest request
of its kind is dropped, so a slow answer to an old query never replaces a newer one.

Thread invariant: each request runs off the UI thread (ui/background.py) and never touches a
widget or the history; its answer is handled on the UI thread.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from models.hub_errors import HubError
from models.network import NetworkGate, NetworkRefused
from ui.background import run_in_background

KINDS = ("search", "files", "fit", "measure")
FIT_UNAVAILABLE = "Fit estimates are not available in this build of Cove."


@dataclass(frozen=True)
class HubReply:
    """One finished request, handed from a worker thread to the UI thread."""

    kind: str  # one of KINDS
    ticket: int
    request: Any  # what was asked (SearchRequest, repo id, FitRequest, MeasureRequest)
    value: Any  # the result; None on failure
    error: str  # one sentence on failure, else ""


@dataclass(frozen=True)
class SearchRequest:
    query: str
    sort: str  # downloads, likes, recent
    limit: int = 30


@dataclass(frozen=True)
class FitRequest:
    repo_id: str
    filename: str  # the file whose header is read (part 1 of a split model)
    file_size: int  # of the whole model (every part)
    revision: str | None
    n_ctx: int
    n_gpu_layers: int = 0
    projector_size: int = 0  # a vision model's projector, downloaded with it (0: text only)


@dataclass(frozen=True)
class FitResult:
    request: FitRequest
    header: Any  # models.remote_header.RemoteHeader, kept so a new context size needs no new read
    estimate: Any  # models.memory_estimate.MemoryEstimate


@dataclass(frozen=True)
class MeasureRequest:
    path: str  # the loaded model file
    pid: int | None  # the engine process
    n_ctx: int
    n_gpu_layers: int = 0
    type_k: str = "f16"  # the KV cache types and flash attention the model loads with (its ModelPlacement)
    type_v: str = "f16"
    flash_attn: bool | None = None  # None: llama.cpp's auto, estimated as on
    mmproj_path: str | None = None  # the loaded model's projector, counted in the estimate


@dataclass(frozen=True)
class MeasureResult:
    request: MeasureRequest
    estimate: Any | None  # MemoryEstimate from the local file's header, None if unavailable
    measured: Any | None  # models.memory_measure.MeasuredMemory, None if the process is unreadable


def sentence_for(exc: BaseException) -> str:
    """One sentence for anything a request raised (never a traceback, never the token)."""
    if isinstance(exc, (HubError, NetworkRefused)):
        return str(exc)
    if isinstance(exc, ImportError):
        return FIT_UNAVAILABLE
    from models.gguf_validate import InvalidModelFile

    if isinstance(exc, InvalidModelFile):
        return str(exc)
    from models.hub_errors import describe_hub_error
    from models.network import prepare_hub_import

    prepare_hub_import()  # describe_hub_error imports huggingface_hub
    return describe_hub_error(exc)


class HubWorker(QObject):
    """Starts requests with `search`, `list_files`, `estimate_fit`, `measure`; each returns a
    ticket and its answer arrives as the matching signal carrying a `HubReply`."""

    searched = Signal(object)  # HubReply(value=list[HubModel])
    files_listed = Signal(object)  # HubReply(value=RepoListing)
    fit_estimated = Signal(object)  # HubReply(value=FitResult)
    memory_measured = Signal(object)  # HubReply(value=MeasureResult)
    busy_changed = Signal(str, bool)  # kind, whether a request of that kind is running

    def __init__(self, gate: NetworkGate, token: Callable[[], str | None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.gate = gate
        self._token = token
        self._ids = itertools.count(1)
        self._latest: dict[str, int] = {kind: 0 for kind in KINDS}
        self._machine: Any = None
        self._machine_lock = threading.Lock()
        self._closed = False
        self._dropped = 0

    # ---- requests ----------------------------------------------------------------------

    def search(self, query: str, sort: str = "downloads", limit: int = 30) -> int:
        from models.hub_search import search_models

        request = SearchRequest(query.strip(), sort, limit)
        return self._run("search", request, lambda: search_models(self.gate, request.query, sort=sort, limit=limit, token=self._token()))

    def list_files(self, repo_id: str, revision: str | None = None) -> int:
        from models.hub_files import list_gguf_files

        return self._run("files", repo_id, lambda: list_gguf_files(self.gate, repo_id, token=self._token(), revision=revision))

    def estimate_fit(self, request: FitRequest, header: Any | None = None) -> int:
        """Read the remote header (unless `header`, an earlier read of the same file, is given)
        and estimate the memory this model needs at `request.n_ctx`."""
        return self._run("fit", request, lambda: self._fit(request, header))

    def measure(self, request: MeasureRequest) -> int:
        """The loaded model's estimate (from its local header) beside what its engine holds."""
        return self._run("measure", request, lambda: self._measure(request))

    def cancel(self, kind: str) -> None:
        """Forget the request of `kind` in flight: its answer will be dropped."""
        self._latest[kind] = next(self._ids)
        self.busy_changed.emit(kind, False)

    def latest(self, kind: str) -> int:
        return self._latest[kind]

    @property
    def dropped(self) -> int:
        """How many answers came too late and were thrown away (a newer request of their kind, a
        cancel, or the window closing, came first); none of them reached the panel."""
        return self._dropped

    def close(self) -> None:
        """Drop every answer still to come (the window is closing)."""
        self._closed = True

    # ---- internals ---------------------------------------------------------------------

    def _run(self, kind: str, request: Any, work: Callable[[], Any]) -> int:
        ticket = next(self._ids)
        self._latest[kind] = ticket
        self.busy_changed.emit(kind, True)
        run_in_background(
            self,
            work,
            on_done=lambda value: self._on_replied(HubReply(kind, ticket, request, value, "")),
            on_failed=lambda sentence: self._on_replied(HubReply(kind, ticket, request, None, sentence)),
            describe=sentence_for,
            name=f"cove-hub-{kind}",
        )
        return ticket

    def _on_replied(self, reply: HubReply) -> None:
        if self._closed or reply.ticket != self._latest.get(reply.kind):
            self._dropped += 1
            return
        self.busy_changed.emit(reply.kind, False)
        {"search": self.searched, "files": self.files_listed, "fit": self.fit_estimated, "measure": self.memory_measured}[reply.kind].emit(
            reply
        )

    def machine_memory(self) -> Any:
        """This machine's memory (read once, then kept); may start an engine process to find a
        GPU, so call it off the UI thread."""
        return self._machine_memory()

    def _machine_memory(self) -> Any:
        from app.engine.gpu_memory import with_engine_gpu
        from models.memory_estimate import machine_memory

        with self._machine_lock:
            if self._machine is None:
                self._machine = with_engine_gpu(machine_memory())
            return self._machine

    def _fit(self, request: FitRequest, header: Any | None) -> FitResult:
        from models.memory_estimate import estimate_memory
        from models.projector import cost_from_size
        from models.remote_header import read_remote_header

        if header is None:
            header = read_remote_header(self.gate, request.repo_id, request.filename, token=self._token(), revision=request.revision)
        size = max(int(request.file_size), int(getattr(header, "file_size", 0) or 0))
        # The parsed header (with its tensor table) gives the exact estimate; its GGUFInfo only an even spread.
        # A projector is known here by its size only: its compute buffer is the typical one (models/projector.py).
        projector = cost_from_size(request.projector_size) if request.projector_size else None
        estimate = estimate_memory(
            header.header, size, request.n_ctx, n_gpu_layers=request.n_gpu_layers, machine=self._machine_memory(), projector=projector
        )
        return FitResult(request, header, estimate)

    def _measure(self, request: MeasureRequest) -> MeasureResult:
        import os

        from models.gguf_validate import read_gguf_header
        from models.library import model_files

        estimate = measured = None
        try:
            from models.memory_estimate import estimate_memory

            size = sum(os.path.getsize(p) for p in model_files(request.path) if os.path.exists(p))
            projector = _projector(request.mmproj_path)
            estimate = estimate_memory(
                read_gguf_header(request.path),
                size,
                request.n_ctx,
                n_gpu_layers=request.n_gpu_layers,
                kv_type=request.type_k,
                type_v=request.type_v,
                flash_attn=request.flash_attn is not False,
                machine=self._machine_memory(),
                projector=projector,
            )
        except ImportError:
            estimate = None
        if request.pid is not None:
            from models.memory_measure import measure_engine_memory

            try:
                measured = measure_engine_memory(request.pid, request.path)
            except Exception:  # noqa: BLE001 - the engine is gone or unreadable: nothing measured
                measured = None
        return MeasureResult(request, estimate, measured)


def _projector(path: str | None) -> Any:
    """The cost of the projector at `path` (models/projector.py), None without one or when it cannot be read."""
    if not path:
        return None
    from models.gguf_errors import InvalidModelFile
    from models.projector import projector_cost, read_projector_header

    try:
        return projector_cost(read_projector_header(path))
    except InvalidModelFile:
        return None
