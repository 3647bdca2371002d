"""The collapsible live performance and memory panel: generation speed over the current reply,
time to first token, prompt speed, context use, the last reply's drafting, what the engine serves
(replies at once in its slots, requests waiting, their rate together), private memory of both
processes, model file, VRAM, backend, device, where the layers and KV cache run, and the KV
cache's types and size (measured beside the estimate) with flash attention.

Every setter only stores values and marks the panel dirty; a 250 ms timer repaints at most
four times a second and only when something changed (the figures at most once a second while
a reply streams or the engine serves replies), so feeding it from the token path costs next to
nothing. While it is shown it polls the engine's serving figures at the same 250 ms.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QFormLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.remote.server_kinds import KIND_NAMES
from ui.background import run_in_background
from ui.perf.kv_figures import LoadedKV, drafting_text, estimated_kv_bytes, kv_text, prompt_text
from ui.perf.serving_line import ServingFigures, ServingPoller, serving_header, serving_live, serving_text
from ui.perf.sparkline import Sparkline
from ui.theme import format_bytes, format_int, format_rate

REFRESH_MS = 250  # at most 4 repaints per second
# While a reply streams the chart moves 4 times a second but the figures change at most once a
# second: a label whose text changes lays out the panel and the main window again (a QLabel's
# new text always asks its layouts for new geometry), on the CPU the engine generates with.
LIVE_FIGURES_S = 1.0
MAX_SAMPLES = 240
RATE_BUCKET_S = 0.25  # tokens_arrived() turns arrivals into one speed sample per bucket
# The figures, top to bottom below the chart: (key, the caption a person reads and the label's accessible name).
FIGURES = (
    ("gen", "Generation"),
    ("serving", "Serving"),
    ("ttft", "First token"),
    ("prompt", "Prompt"),
    ("context", "Context"),
    ("drafting", "Drafting"),
    ("ui_mem", "Window memory"),
    ("engine_mem", "Engine memory"),
    ("model_file", "Model file"),
    ("vram", "VRAM"),
    ("backend", "Backend"),
    ("layers", "Layers"),
    ("kv", "KV cache"),
)


class PerfPanel(QWidget):
    """Shows what the current turn and the loaded model cost. Emits `expanded_changed(bool)`."""

    expanded_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None, expanded: bool = True) -> None:
        super().__init__(parent)
        self._samples: deque[float] = deque(maxlen=MAX_SAMPLES)
        self._streaming = False
        self._bucket_start: float | None = None
        self._bucket_tokens = 0
        self._metrics: dict[str, Any] = {}
        self._file_size: int | None = None
        self._backend: str | None = None
        self._placement: dict[str, Any] = {}
        self._gpu_layers: int | None = None
        self._vram: int | None = None
        self._ui_uss: int | None = None
        self._engine_uss: int | None = None
        self._kv: LoadedKV | None = None
        self._kv_estimate: int | None = None
        self._serving: ServingFigures | None = None
        self._dirty = False
        self._figures_at = float("-inf")  # monotonic time the figures were last shown

        self._header = QToolButton(self)
        self._header.setText("Performance")
        self._header.setAccessibleName("Performance panel")
        self._expanded = expanded
        self._header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self._header.setAutoRaise(True)
        # As wide as "Performance" needs: the rate added after a reply is cut short in a narrow
        # panel rather than widening it (and narrowing the chat) once the first reply is done.
        self._header.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        header_font = self._header.font()
        header_font.setBold(True)
        self._header.setFont(header_font)
        self._header.setMinimumWidth(self._header.sizeHint().width())
        self._header.clicked.connect(lambda: self.set_expanded(not self._expanded))

        self._body = QWidget(self)
        self.sparkline = Sparkline(self._body)
        self.sparkline.setAccessibleName("Generation speed over this reply")
        self._labels: dict[str, QLabel] = {}
        self._form = form = QFormLayout(self._body)
        form.setContentsMargins(8, 0, 8, 4)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow(self.sparkline)
        for key, caption in FIGURES:
            label = QLabel("–", self._body)
            label.setAccessibleName(caption)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setWordWrap(True)  # a long figure takes two lines, not a wider panel
            self._labels[key] = label
            form.addRow(caption, label)
        self._labels["ui_mem"].setToolTip("Private memory (USS) of this window's process")
        self._labels["engine_mem"].setToolTip("Private memory (USS) of the engine process")
        self._labels["model_file"].setToolTip("Size of the model file, mapped into the engine's memory")
        self._labels["prompt"].setToolTip(
            "Prompt tokens the engine read for the last reply, and those it did not "
            "have to read: kept from the turn before, or restored from the "
            "conversation's saved state"
        )
        self._labels["kv"].setToolTip(
            "The KV cache's K and V types, the buffers llama.cpp allocated for it beside the memory estimate, and flash attention as loaded"
        )
        self._labels["serving"].setToolTip(
            "Replies the engine generates at once in its slots (this window's and "
            "API clients'), requests waiting for a free slot, and the tokens per "
            "second of all of them together"
        )
        self._form.setRowVisible(self._labels["serving"], False)  # until a source says a model is loaded
        self._labels["drafting"].setToolTip(
            "Tokens drafted (from the conversation or a draft model) and how many the model accepted in the last reply"
        )

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._header)
        layout.addWidget(self._body)
        layout.addStretch(1)  # collapsed: the header stays at the top

        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._on_tick)
        self._serving_poller = ServingPoller(self._serving_changed, REFRESH_MS, self)

        self._apply_expanded()
        self._render()

    # ---- commands (cheap: they store and mark dirty) ------------------------------------

    def set_expanded(self, expanded: bool) -> None:
        """Show or hide the body below the header."""
        if expanded != self._expanded:
            self._expanded = expanded
            self._apply_expanded()
            self.expanded_changed.emit(expanded)

    def is_expanded(self) -> bool:
        return self._expanded

    def _apply_expanded(self) -> None:
        self._figures_at = float("-inf")  # what the header shows changes now, not within a second
        self._mark_dirty()  # the header shows the live rate only while collapsed
        self._header.setArrowType(Qt.ArrowType.DownArrow if self._expanded else Qt.ArrowType.RightArrow)
        self._header.setAccessibleDescription("expanded" if self._expanded else "collapsed")
        self._body.setVisible(self._expanded)

    def reply_started(self) -> None:
        """A new reply begins: clear the speed chart and the per-turn figures."""
        self._samples.clear()
        self._streaming = True
        self._bucket_start = None
        self._bucket_tokens = 0
        self._metrics = {}
        self._figures_at = float("-inf")
        self._mark_dirty()

    def tokens_arrived(self, n_tokens: int, t: float) -> None:
        """`n_tokens` arrived at monotonic time `t` (seconds); folded into one speed sample per 0.25 s."""
        if self._bucket_start is None:
            self._bucket_start = t  # the first arrival only starts the clock
            return
        self._bucket_tokens += n_tokens
        elapsed = t - self._bucket_start
        if elapsed >= RATE_BUCKET_S:
            self.add_rate_sample(self._bucket_tokens / elapsed)
            self._bucket_start = t
            self._bucket_tokens = 0

    def add_rate_sample(self, tok_per_s: float) -> None:
        """Append one generation-speed sample to the chart."""
        self._samples.append(float(tok_per_s))
        self._mark_dirty()

    def set_first_figures(self, figures: dict[str, Any]) -> None:
        """Figures known once the reply's first token arrived (ttft_ms, prompt_tokens, cached_tokens,
        prompt_tps), shown at the next repaint while it streams; the finished turn's replace them."""
        if not self._streaming:
            return
        self._metrics.update(figures)
        self._figures_at = float("-inf")  # not held back to the once-a-second live repaint
        self._mark_dirty()

    def set_turn_metrics(self, metrics: dict[str, Any]) -> None:
        """The finished turn's figures: ttft_ms, prompt_tps, gen_tps, context_used, n_ctx, gen_tokens."""
        self._metrics = dict(metrics)
        self._streaming = False
        self._mark_dirty()

    def set_model_info(
        self,
        file_size: int | None,
        backend: str,
        gpu_layers: int,
        vram_bytes: int | None = None,
        *,
        placement: dict[str, Any] | None = None,
    ) -> None:
        """The loaded model: file size, backend name (e.g. 'CPU', 'CUDA'), layers offloaded, VRAM if
        known, and where the engine put it (LoadedModel.placement: device, layers, KV cache, VRAM)."""
        self._file_size = file_size
        self._backend = backend
        self._gpu_layers = gpu_layers
        self._placement = dict(placement or {})
        used = self._placement.get("vram_used")
        self._vram = vram_bytes if vram_bytes is not None else (used if isinstance(used, int) else None)
        self._labels["layers"].setToolTip(str(self._placement.get("note") or ""))
        self._mark_dirty()

    def set_loaded(self, loaded: Any) -> None:
        """The loaded model (a LoadedModel): its KV cache types, size and flash attention, and the
        draft model; the estimate's KV size beside it is read from the model's header off this thread."""
        kv = LoadedKV.of(loaded)
        self._kv, self._kv_estimate = kv, None
        self._mark_dirty()

        def estimated(size: int) -> None:
            if self._kv is kv:  # not a model loaded since
                self._kv_estimate = size
                self._mark_dirty()

        run_in_background(self, lambda: estimated_kv_bytes(kv), on_done=estimated, name="cove-kv-estimate")

    def set_memory(self, ui_uss: int | None, engine_uss: int | None) -> None:
        """Private memory (USS) of the window process and of the engine process; None = unknown."""
        if (ui_uss, engine_uss) != (self._ui_uss, self._engine_uss):
            self._ui_uss, self._engine_uss = ui_uss, engine_uss
            self._mark_dirty()

    def watch_serving(self, source: Callable[[], ServingFigures] | None) -> None:
        """Poll `source` (EngineClient.serving: cheap, no I/O) every 250 ms on the UI thread while the
        panel is shown, for the Serving line; None stops it and hides the line."""
        self._serving_poller.set_source(source)
        if source is not None and self.isVisible():
            self._serving_poller.start()

    def _serving_changed(self, figures: ServingFigures | None) -> None:
        self._serving = figures
        self._mark_dirty()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._serving_poller.start()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 (Qt override)
        self._serving_poller.stop()  # a hidden panel asks the engine nothing
        super().hideEvent(event)

    # ---- what a person sees (read-only handles for tests) ---------------------------------

    @property
    def header(self) -> QToolButton:
        """The button at the top: "Performance", with the rate after it while the body is hidden
        (or once a reply is done); a click collapses or expands the body."""
        return self._header

    @property
    def body(self) -> QWidget:
        """The part below the header (the chart and the figures), shown while expanded."""
        return self._body

    def label(self, key: str) -> QLabel:
        """The label that shows one figure (a key of FIGURES), with its tooltip and accessible name."""
        return self._labels[key]

    def label_text(self, key: str) -> str:
        """The text currently shown for one figure (gen, serving, ttft, prompt, context, drafting, ui_mem,
        engine_mem, model_file, vram, backend, layers, kv)."""
        return self._labels[key].text()

    def line_shown(self, key: str) -> bool:
        """Whether one figure's line (caption and label) is in the body: the Serving line is left out
        while no source says a model is loaded; the others always are."""
        return self._form.isRowVisible(self._labels[key])

    def is_idle(self) -> bool:
        """True while the refresh timer is stopped: it stops at its first tick with nothing changed
        and starts again at the next change."""
        return not self._timer.isActive()

    # ---- rendering ---------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        self._dirty = True
        if not self._timer.isActive():
            self._timer.start()

    def _on_tick(self) -> None:
        if not self._dirty:
            self._timer.stop()  # idle: no timer runs until the next change
            return
        now = time.monotonic()
        live = self._streaming or serving_live(self._serving)
        if live and now - self._figures_at < LIVE_FIGURES_S:
            self.sparkline.set_values(self._samples)  # the figures follow within a second
            return  # still dirty: the timer keeps running
        self._dirty = False
        self._figures_at = now
        self._render()

    def _render(self) -> None:
        m = self._metrics
        self.sparkline.set_values(self._samples)
        live = self._samples[-1] if self._samples else None
        final = _number(m.get("gen_tps"))
        if self._streaming:
            gen = format_rate(live) if live is not None else "…"
        elif final is not None:
            tokens = m.get("gen_tokens")
            gen = format_rate(final) + (f" · {format_int(tokens)} tokens" if isinstance(tokens, int) else "")
        else:
            gen = "–"
        self._set("gen", gen)
        serving = serving_text(self._serving)
        self._set("serving", serving)
        if self._form.isRowVisible(self._labels["serving"]) != bool(serving):
            self._form.setRowVisible(self._labels["serving"], bool(serving))
        ttft = _number(m.get("ttft_ms"))
        self._set("ttft", f"{ttft:,.0f} ms" if ttft is not None else "–")
        self._set("prompt", prompt_text(m))
        used, n_ctx = m.get("context_used"), m.get("n_ctx")
        if isinstance(used, int) and isinstance(n_ctx, int) and n_ctx > 0:
            self._set("context", f"{format_int(used)} / {format_int(n_ctx)} tokens ({used / n_ctx:.0%})")
        else:
            self._set("context", "–")
        self._set("ui_mem", format_bytes(self._ui_uss))
        if self._ran_on() is not None:  # this machine's engine and file had no part in the turn
            for figure in ("engine_mem", "model_file", "vram"):
                self._set(figure, "on the server")
        else:
            self._set("engine_mem", format_bytes(self._engine_uss) if self._engine_uss is not None else "no engine running")
            self._set("model_file", format_bytes(self._file_size) if self._file_size is not None else "no model loaded")
            self._set("vram", self._vram_text())
        self._set("backend", self._backend_text())
        self._set("layers", self._layers_text())
        remote = self._ran_on() is not None
        self._set("kv", "on the server" if remote else kv_text(self._kv, self._kv_estimate))
        self._set("drafting", "on the server" if remote else drafting_text(m, self._kv))
        header = "Performance"
        # The live rate goes into the header only while the body (and its Generation line) is
        # hidden: a header whose text changes 4 times a second re-lays out and repaints the
        # whole panel each time, on the CPU the engine is generating with.
        rate = (live if not self._expanded else None) if self._streaming else final
        if rate is not None:
            header += f"  ·  {format_rate(rate)}"
        together = serving_header(self._serving) if not self._expanded else ""
        if together:
            header += f"  ·  {together}"
        if self._header.text() != header:
            self._header.setText(header)

    def _vram_text(self) -> str:
        estimate = self._placement.get("vram_estimate")
        if self._vram is not None:
            return format_bytes(self._vram) + (f" (estimated {format_bytes(estimate)})" if isinstance(estimate, int) else "")
        if self._backend is None:
            return "–"
        if self._backend.lower() == "cpu":
            return "n/a (no GPU)"
        if not self._gpu_layers:
            return "not used (no layers on GPU)"
        return "not measured"

    def _ran_on(self) -> dict[str, Any] | None:
        """Where the shown turn ran when it was one of the person's servers (metrics["remote"])."""
        remote = self._metrics.get("remote")
        return remote if isinstance(remote, dict) and remote.get("host") else None

    def _backend_text(self) -> str:
        remote = self._ran_on()
        if remote is not None:  # the reply came from a server: that is where it ran
            kind = KIND_NAMES.get(str(remote.get("kind")))
            return f"your server {remote['host']}" + (f" ({kind})" if kind else "")
        if self._backend is None:
            return "–"
        device = self._placement.get("device")
        if device:
            return f"{_BACKEND_NAMES.get(self._backend.lower(), self._backend)} · {device}"
        layers = self._gpu_layers or 0
        if layers <= 0:
            return f"{self._backend} · all layers on CPU"
        return f"{self._backend} · {layers} layers on GPU"

    def _layers_text(self) -> str:
        if self._ran_on() is not None:
            return "on the server"
        total, on_gpu = self._placement.get("n_layers"), self._placement.get("n_gpu_layers")
        if not isinstance(total, int) or not isinstance(on_gpu, int):
            return "–"
        if on_gpu <= 0:
            return f"all {total} on CPU"
        if not self._placement.get("kv_on_gpu"):
            kv = "KV cache in RAM"
        else:  # llama.cpp keeps each layer's KV cache where the layer runs
            kv = "KV cache on GPU" if on_gpu >= total else "KV cache with its layers"
        return f"{on_gpu} of {total} on GPU · {kv}"

    def _set(self, key: str, text: str) -> None:
        label = self._labels[key]
        if label.text() != text:
            label.setText(text)


# llama.cpp's backends as their makers spell them (the engine reports them in lower case).
_BACKEND_NAMES = {
    "cpu": "CPU",
    "cuda": "CUDA",
    "vulkan": "Vulkan",
    "metal": "Metal",
    "rocm": "ROCm",
    "hip": "HIP",
    "sycl": "SYCL",
    "opencl": "OpenCL",
    "cann": "CANN",
    "musa": "MUSA",
}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
