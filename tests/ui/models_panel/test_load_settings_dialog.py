"""The "How NAME loads" dialog with the load settings beyond where a model runs: every control
round-trips, a quantized V cache with flash attention off disables OK with the reason, the memory
estimate follows the chosen cache types before anything loads, only installed models with the same
vocabulary are offered as draft models (a draft model set before and gone since is kept, marked),
and the panel keeps the choice for the model's next load."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtWidgets import QComboBox, QDialogButtonBox

from app.settings import ModelPlacement
from models.gguf_validate import read_gguf_header
from models.load_estimate import estimate_load
from models.memory_estimate import MachineMemory
from tests.conftest import CHATML_TOKENS
from tests.support.tiny_model import write_tiny_gguf
from ui.models_panel.placement_dialog import NO_DRAFT, PlacementDialog
from ui.theme import format_bytes

ROOMY = MachineMemory(total_ram=64 * 10**9, available_ram=60 * 10**9, vram_total=None)
WAIT_MS = 10_000


def _ok(dialog: PlacementDialog):
    return dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)


def _choose(combo: QComboBox, label: str) -> None:
    """Pick the item the person reads as `label`."""
    index = combo.findText(label)
    assert index >= 0, f"{combo.accessibleName()} has no {label!r}"
    combo.setCurrentIndex(index)


@pytest.mark.parametrize(
    "placement",
    [
        ModelPlacement(),
        ModelPlacement(type_k="q8_0", type_v="q8_0", flash_attn=True),
        ModelPlacement(0, False, "q4_0", "f16", False, "off"),
        ModelPlacement(-1, True, "f16", "q4_0", None, "auto", "some-draft"),
    ],
)
def test_every_control_shows_and_returns_its_choice(qtbot, placement: ModelPlacement) -> None:
    dialog = PlacementDialog("tiny", placement)
    qtbot.addWidget(dialog)
    assert dialog.windowTitle() == "How tiny loads"
    assert dialog.placement() == placement
    assert dialog.draft.isEnabled() == (placement.speculative == "auto")
    assert _ok(dialog).isEnabled()


def test_a_quantized_v_with_flash_attention_off_disables_ok_with_the_reason(qtbot) -> None:
    dialog = PlacementDialog("tiny", ModelPlacement())
    qtbot.addWidget(dialog)
    dialog.type_v.setCurrentIndex(dialog.type_v.findData("q8_0"))
    assert _ok(dialog).isEnabled()  # flash attention auto: fine
    _choose(dialog.flash, "Off")
    reason = "A q8_0 V cache needs flash attention: set flash attention to auto or on, or the V cache to f16."
    assert not _ok(dialog).isEnabled() and dialog.problem_text() == reason and _ok(dialog).toolTip() == reason
    dialog.type_k.setCurrentIndex(dialog.type_k.findData("q4_0"))
    assert not _ok(dialog).isEnabled()  # still the V cache
    dialog.type_v.setCurrentIndex(dialog.type_v.findData("f16"))
    assert _ok(dialog).isEnabled() and dialog.problem_text() == ""  # a quantized K alone is fine
    dialog.type_v.setCurrentIndex(dialog.type_v.findData("q4_0"))
    _choose(dialog.flash, "Auto (llama.cpp decides)")
    assert _ok(dialog).isEnabled()


def test_the_estimate_follows_the_chosen_cache_types_before_loading(qtbot, cove_core) -> None:
    model = cove_core.library.get("tiny-llama")
    dialog = PlacementDialog(model.name, ModelPlacement(), model=model, n_ctx=None, machine=lambda: ROOMY)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.memory.text().startswith("At "), timeout=WAIT_MS)
    header = read_gguf_header(model.path)

    def expected(**types: object) -> str:
        load = estimate_load(header, model.size, None, ROOMY, slots=None, **types)  # type: ignore[arg-type]
        assert load.estimate.slots == 4  # a roomy CPU-only machine: as many as a CPU gets
        return format_bytes(load.kv_bytes)

    f16 = dialog.memory.text()
    assert f16.startswith(f"At 512 tokens a slot, 4 slots: KV cache {expected()}; about ") and "(f16:" not in f16
    assert f16.endswith("in all, with every slot's context full. Verdict: fits in RAM.")
    dialog.type_k.setCurrentIndex(dialog.type_k.findData("q8_0"))
    dialog.type_v.setCurrentIndex(dialog.type_v.findData("q4_0"))
    mixed = dialog.memory.text()
    assert mixed.startswith(f"At 512 tokens a slot, 4 slots: KV cache {expected(type_k='q8_0', type_v='q4_0')} (f16: {expected()}); ")
    assert expected(type_k="q8_0", type_v="q4_0") != expected()
    _choose(dialog.flash, "Off")
    assert dialog.memory.text() == "No estimate: these settings cannot be used."


def test_the_estimate_counts_the_slots_it_is_given(qtbot, cove_core) -> None:
    model = cove_core.library.get("tiny-llama")
    dialog = PlacementDialog(model.name, ModelPlacement(), model=model, machine=lambda: ROOMY, slots=1)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.memory.text().startswith("At "), timeout=WAIT_MS)
    one = estimate_load(read_gguf_header(model.path), model.size, None, ROOMY)
    assert dialog.memory.text().startswith(f"At 512 tokens, 1 slot: KV cache {format_bytes(one.kv_bytes)}; about ")
    assert dialog.memory.text().endswith("in all, with the context full. Verdict: fits in RAM.")


def test_only_models_with_the_same_vocabulary_are_offered_to_draft(qtbot, cove_core, tmp_path: Path) -> None:
    shutil.copyfile(write_tiny_gguf(tmp_path / "seed3.gguf", seed=3), tmp_path / "drafter.gguf")
    cove_core.library.import_file(tmp_path / "drafter.gguf")
    cove_core.library.import_file(write_tiny_gguf(tmp_path / "chatty.gguf", extra_tokens=CHATML_TOKENS))
    model = cove_core.library.get("tiny-llama")
    dialog = PlacementDialog(
        model.name, ModelPlacement(draft_model="gone"), model=model, candidates=cove_core.library.list(), machine=lambda: ROOMY
    )
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.memory.text().startswith("At "), timeout=WAIT_MS)
    items = [dialog.draft.itemText(i) for i in range(dialog.draft.count())]
    assert items == [NO_DRAFT, "drafter", "gone (not installed, or another vocabulary)"]
    assert dialog.placement().draft_model == "gone"  # kept until the person picks another
    dialog.draft.setCurrentIndex(dialog.draft.findData("drafter"))
    assert dialog.placement() == ModelPlacement(draft_model="drafter")
    dialog.drafting.setCurrentIndex(dialog.drafting.findData("off"))
    assert not dialog.draft.isEnabled() and dialog.placement().speculative == "off"


def test_the_panel_opens_the_dialog_with_the_model_and_keeps_the_choice(qtbot, panel, cove_core, monkeypatch) -> None:
    monkeypatch.setattr(panel.worker, "machine_memory", lambda: ROOMY)
    seen: list[PlacementDialog] = []

    def answer(self: PlacementDialog) -> int:
        seen.append(self)
        qtbot.waitUntil(lambda: self.memory.text().startswith("At "), timeout=WAIT_MS)
        self.type_k.setCurrentIndex(self.type_k.findData("q8_0"))
        self.type_v.setCurrentIndex(self.type_v.findData("q8_0"))
        self._select(self.flash, True)
        return PlacementDialog.DialogCode.Accepted

    panel.installed_view.select("tiny-llama")
    monkeypatch.setattr(PlacementDialog, "exec", answer)
    panel.installed_view.place_button.click()
    assert seen and seen[0].windowTitle() == "How tiny-llama loads"
    assert cove_core.settings.placement_for("tiny-llama") == ModelPlacement(type_k="q8_0", type_v="q8_0", flash_attn=True)
    assert panel.message_text() == (
        "tiny-llama: as many GPU layers as fit, the KV cache with its layers, a q8_0 KV cache, flash attention on, from its next load."
    )


def test_the_loaded_models_estimate_uses_its_chosen_cache_types(qtbot, panel, cove_core, monkeypatch) -> None:
    from ui.models_panel.hub_worker import MeasureRequest

    monkeypatch.setattr(panel.worker, "_machine_memory", lambda: ROOMY)
    model = cove_core.library.get("tiny-llama")
    estimates = {}
    for types in (("f16", "f16", None), ("q8_0", "q4_0", True)):
        with qtbot.waitSignal(panel.worker.memory_measured, timeout=WAIT_MS) as got:
            panel.worker.measure(MeasureRequest(model.path, None, 512, type_k=types[0], type_v=types[1], flash_attn=types[2]))
        estimates[types[0]] = got.args[0].value.estimate
    f16, mixed = estimates["f16"], estimates["q8_0"]
    assert (mixed.kv_type, mixed.type_v) == ("q8_0", "q4_0")
    values = 512 * 2 * 64  # per cache: the tiny model's context x layers x KV width
    assert (f16.kv_ram, mixed.kv_ram) == (values * 4, values // 32 * (34 + 18))
    assert f16.total_ram - mixed.total_ram == f16.kv_ram - mixed.kv_ram
