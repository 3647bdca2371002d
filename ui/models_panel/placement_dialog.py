"""The "How NAME loads" dialog of one installed model: GPU layers (Cove's choice, the CPU only, all,
or a number), where the KV cache goes and its K and V types, flash attention, drafting and the
draft model (installed models with the same vocabulary). Before anything loads it shows what the
KV cache and the whole model would take with the chosen settings and the slots the engine would
hold (conversations at once, each with the whole context), and the fit verdict; a combination
llama.cpp would refuse disables OK and says why.

Thread invariant: the model's header, the machine's memory and the draft models' vocabularies
are read off the UI thread (ui/background.py) once when the dialog opens; the estimate for each
choice is arithmetic on that header, on the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QSpinBox, QWidget

from app.settings import KV_CACHE_TYPES, ModelPlacement
from models.library import InstalledModel
from ui.background import run_in_background
from ui.theme import format_bytes, show_sentence

_LAYERS = (("auto", "As many as fit (Cove chooses)"), ("cpu", "None: the CPU only"), ("all", "All of them"), ("count", "This many:"))
_KV = ((None, "With its layers"), (False, "In RAM (leaves VRAM to the layers)"), (True, "On the GPU"))
_KV_TYPES = {"f16": "f16 (full precision)", "q8_0": "q8_0 (about half the memory)", "q4_0": "q4_0 (about a quarter)"}
_FLASH = ((None, "Auto (llama.cpp decides)"), (True, "On"), (False, "Off"))
_DRAFTING = (("auto", "Auto: from the conversation or a draft model, when it pays"), ("off", "Off"))
NO_DRAFT = "None"


@dataclass(frozen=True)
class ModelFacts:
    """What the dialog reads off the UI thread when it opens."""

    header: Any  # models.gguf_validate.GGUFHeader
    machine: Any  # models.memory_records.MachineMemory
    drafts: tuple[str, ...]  # installed models that may draft for this one
    projector: Any = None  # models.projector.ProjectorCost of a vision model's projector, else None


class PlacementDialog(QDialog):
    """Edits one model's ModelPlacement; placement() is the person's choice after accept. With
    `model` (and `machine`, how to read this machine's memory, off the UI thread) it shows the
    memory estimate; `candidates` are the installed models a draft model may be chosen from.
    `slots`: the engine's `parallel` the estimate counts (None: as many as fit by the estimate,
    models.slots.default_parallel, for each choice of settings)."""

    def __init__(
        self,
        model_name: str,
        placement: ModelPlacement,
        parent: QWidget | None = None,
        *,
        model: InstalledModel | None = None,
        candidates: Sequence[InstalledModel] = (),
        n_ctx: int | None = None,
        machine: Callable[[], Any] | None = None,
        slots: int | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"How {model_name} loads")
        self._model, self._n_ctx, self._slots = model, n_ctx, slots
        self._facts: ModelFacts | None = None
        self._draft_names: tuple[str, ...] = ()
        self.layers = self._combo("GPU layers", [(key, label) for key, label in _LAYERS])
        self.count = QSpinBox(self)
        self.count.setAccessibleName("Number of GPU layers")
        self.count.setRange(1, 1024)
        self.kv = self._combo("KV cache", _KV)
        self.type_k = self._combo("K cache type", [(t, _KV_TYPES[t]) for t in KV_CACHE_TYPES])
        self.type_v = self._combo("V cache type", [(t, _KV_TYPES[t]) for t in KV_CACHE_TYPES])
        for combo in (self.type_k, self.type_v):
            combo.setToolTip(
                "A quantized cache holds a longer context in the same memory; on a CPU it reads "
                "prompts more slowly (about 0.6× at q8_0 on the starter) and generates at about "
                "the same speed."
            )
        self.flash = self._combo("Flash attention", _FLASH)
        self.drafting = self._combo("Drafting", _DRAFTING)
        self.draft = self._combo("Draft model", [(None, NO_DRAFT)])
        self.draft.setToolTip(
            "A small installed model with the same vocabulary drafts tokens that this one checks "
            "in one batch; the reply is the same, sooner where the drafts are right."
        )
        self.memory = QLabel("Reading the model file…" if model is not None else "", self)
        self.memory.setAccessibleName("Memory with these settings")
        self.memory.setWordWrap(True)
        self.memory.setToolTip(
            "Each slot holds one conversation with its whole context, so the engine can answer "
            "several at once (the window and the API); every slot has its own KV cache."
        )
        self.problem = QLabel(self)
        self.problem.setAccessibleName("Why these settings cannot be used")
        self.problem.setWordWrap(True)
        self.problem.hide()
        note = QLabel("Used from the next load of the model. Without a GPU every layer runs on the CPU.", self)
        note.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("GPU layers", self.layers)
        form.addRow("", self.count)
        form.addRow("KV cache", self.kv)
        form.addRow("K cache type", self.type_k)
        form.addRow("V cache type", self.type_v)
        form.addRow("Flash attention", self.flash)
        form.addRow("Drafting", self.drafting)
        form.addRow("Draft model", self.draft)
        form.addRow(self.memory)
        form.addRow(self.problem)
        form.addRow(note)
        form.addRow(self.buttons)
        self.set_placement(placement)
        for combo in (self.layers, self.kv, self.type_k, self.type_v, self.flash, self.drafting, self.draft):
            combo.currentIndexChanged.connect(self._follow)
        self.count.valueChanged.connect(self._follow)
        if model is not None:
            self._read(model, [(m.name, m.path) for m in candidates if m.name != model.name], machine)

    # ---- the person's choice -------------------------------------------------------------

    def set_placement(self, placement: ModelPlacement) -> None:
        layers = placement.gpu_layers
        key = "auto" if layers is None else "cpu" if layers == 0 else "all" if layers < 0 else "count"
        self.layers.setCurrentIndex(self.layers.findData(key))
        if key == "count" and layers is not None:
            self.count.setValue(layers)
        self._select(self.kv, placement.kv_on_gpu)
        self._select(self.type_k, placement.type_k)
        self._select(self.type_v, placement.type_v)
        self._select(self.flash, placement.flash_attn)
        self._select(self.drafting, placement.speculative)
        self._fill_drafts(placement.draft_model)
        self._follow()

    def placement(self) -> ModelPlacement:
        key = self.layers.currentData()
        layers = {"auto": None, "cpu": 0, "all": -1}.get(key, self.count.value())
        return ModelPlacement(
            gpu_layers=layers,
            kv_on_gpu=self.kv.currentData(),
            type_k=self.type_k.currentData(),
            type_v=self.type_v.currentData(),
            flash_attn=self.flash.currentData(),
            speculative=self.drafting.currentData(),
            draft_model=self.draft.currentData(),
        )

    def problem_text(self) -> str:
        """The sentence beside OK when these settings cannot be used ("" when they can)."""
        return self.problem.text() if not self.problem.isHidden() else ""

    # ---- following the choice ------------------------------------------------------------

    def _follow(self) -> None:
        self.count.setEnabled(self.layers.currentData() == "count")
        self.draft.setEnabled(self.drafting.currentData() == "auto")
        chosen = self.placement()
        problem = chosen.problem() or ""
        show_sentence(self.problem, problem, True, self)
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(not problem)
        ok.setToolTip(problem)
        self._show_estimate(chosen, problem)

    def _show_estimate(self, chosen: ModelPlacement, problem: str) -> None:
        facts = self._facts
        if facts is None or self._model is None:
            return
        if problem:
            self.memory.setText("No estimate: these settings cannot be used.")
            return
        from models.load_estimate import estimate_load

        try:
            load = estimate_load(
                facts.header,
                self._model.size,
                self._n_ctx,
                facts.machine,
                type_k=chosen.type_k,
                type_v=chosen.type_v,
                flash_attn=chosen.flash_attn,
                gpu_layers=chosen.gpu_layers,
                slots=self._slots,
                projector=facts.projector,
            )
        except ValueError as exc:
            self.memory.setText(f"No estimate: {exc}.")
            return
        e = load.estimate
        saved = f" (f16: {format_bytes(load.kv_f16)})" if load.kv_f16 != load.kv_bytes else ""
        vram = f" and {format_bytes(e.total_vram)} of VRAM" if e.n_gpu_layers else ""
        held = f"At {e.n_ctx:,} tokens, 1 slot" if e.slots == 1 else f"At {e.n_ctx:,} tokens a slot, {e.slots} slots"
        full = "the context full" if e.slots == 1 else "every slot's context full"
        self.memory.setText(
            f"{held}: KV cache {format_bytes(load.kv_bytes)}{saved}; about "
            f"{format_bytes(e.total_ram)} of RAM{vram} in all, with {full}. Verdict: {e.verdict}."
        )

    # ---- reading off the UI thread ---------------------------------------------------------

    def _read(self, model: InstalledModel, candidates: list[tuple[str, str]], machine: Callable[[], Any] | None) -> None:
        def work() -> ModelFacts:
            from models.gguf_validate import read_gguf_header
            from models.memory_estimate import machine_memory
            from models.projector import installed_projector_cost
            from models.vocab_match import drafts_for

            header = read_gguf_header(model.path)
            drafts = tuple(drafts_for(model.path, candidates))
            return ModelFacts(header, (machine or machine_memory)(), drafts, installed_projector_cost(model))

        run_in_background(self, work, on_done=self._on_read, on_failed=self._on_read_failed, name="cove-placement")

    def _on_read(self, facts: ModelFacts) -> None:
        self._facts = facts
        self._draft_names = facts.drafts
        self._fill_drafts(self.draft.currentData())
        self._follow()

    def _on_read_failed(self, sentence: str) -> None:
        self.memory.setText(f"No estimate: {sentence}")

    def _fill_drafts(self, chosen: str | None) -> None:
        """None, the models that may draft, and the chosen one even when it is not (yet) among them."""
        self.draft.blockSignals(True)
        self.draft.clear()
        self.draft.addItem(NO_DRAFT, None)
        for name in self._draft_names:
            self.draft.addItem(name, name)
        if chosen and chosen not in self._draft_names:
            missing = self._facts is not None  # the list is known: the chosen model is not on it
            self.draft.addItem(f"{chosen} (not installed, or another vocabulary)" if missing else chosen, chosen)
        self._select(self.draft, chosen)
        self.draft.blockSignals(False)

    # ---- helpers ---------------------------------------------------------------------------

    def _combo(self, name: str, items: Sequence[tuple[Any, str]]) -> QComboBox:
        combo = QComboBox(self)
        combo.setAccessibleName(name)
        for value, label in items:
            combo.addItem(label, value)
        return combo

    @staticmethod
    def _select(combo: QComboBox, value: Any) -> None:
        """Select the item whose data is `value` (findData cannot tell None from False)."""
        for i in range(combo.count()):
            data = combo.itemData(i)
            if data is value or (data == value and type(data) is type(value)):
                combo.setCurrentIndex(i)
                return
