"""Where a model runs, chosen in the Models panel: the dialog round-trips every choice, the
panel keeps it in the settings for the model's next load, and a cancel changes nothing."""

from __future__ import annotations

import pytest

from app.settings import ModelPlacement
from ui.models_panel.placement_dialog import PlacementDialog


@pytest.mark.parametrize("placement", [ModelPlacement(), ModelPlacement(0, None), ModelPlacement(-1, True), ModelPlacement(20, False)])
def test_the_dialog_shows_and_returns_each_choice(qtbot, placement: ModelPlacement) -> None:
    dialog = PlacementDialog("tiny", placement)
    qtbot.addWidget(dialog)
    assert dialog.placement() == placement
    assert dialog.count.isEnabled() == (placement.gpu_layers is not None and placement.gpu_layers > 0)


def test_the_panel_keeps_the_choice_for_the_next_load(qtbot, panel, cove_core, monkeypatch) -> None:
    def answer(self: PlacementDialog) -> int:
        self.layers.setCurrentIndex(self.layers.findData("count"))
        self.count.setValue(12)
        self.kv.setCurrentIndex(self.kv.findData(False))
        return PlacementDialog.DialogCode.Accepted

    panel.installed_view.select("tiny-llama")
    monkeypatch.setattr(PlacementDialog, "exec", answer)
    panel.installed_view.place_button.click()
    assert cove_core.settings.placement_for("tiny-llama") == ModelPlacement(12, False)
    assert panel.message_text() == "tiny-llama: 12 layers on the GPU, the KV cache in RAM, from its next load."
    monkeypatch.setattr(PlacementDialog, "exec", lambda self: PlacementDialog.DialogCode.Rejected)
    panel.installed_view.place_button.click()
    assert cove_core.settings.placement_for("tiny-llama") == ModelPlacement(12, False)  # cancelled: kept
