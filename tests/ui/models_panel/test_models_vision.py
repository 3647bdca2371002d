"""Vision models in the window (pytest-qt, offscreen): a Hub file with a projector is one row marked
"· vision" and downloads as one model with its projector; a dropped model and projector import as a
pair, a projector alone is refused in a sentence; the catalog, the installed list and the picker
mark vision models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from models.catalog import load_catalog
from tests.support.models_panel import WAIT_MS, make_panel
from tests.support.tiny_vision import write_tiny_vision
from ui.chat.model_picker import ModelPicker

REPO = "org/tiny-vision-GGUF"
FILE = "tiny-Q8_0.gguf"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path / "files")


@pytest.fixture
def vision_panel(qtbot, cove_core, fake_hub, pair):
    fake_hub.add_repo(REPO, {FILE: pair[0].read_bytes(), "mmproj-tiny-f16.gguf": pair[1].read_bytes()})
    panel = make_panel(qtbot, cove_core)
    yield panel
    panel.downloads.shutdown()


def test_a_hub_file_with_a_projector_is_one_row_and_downloads_as_one_model(qtbot, vision_panel, cove_core, pair):
    panel = vision_panel
    panel.choose_repo(REPO)
    qtbot.waitUntil(lambda: panel.files_view.listing() is not None, timeout=WAIT_MS)
    rows = panel.files_view.rows()
    assert [r[0] for r in rows] == [f"{FILE} · vision"]  # the projector is no row of its own
    panel.files_view.choose(0)
    qtbot.waitUntil(lambda: panel.files_view.fit_text().lower().startswith(("fits", "too large")), timeout=WAIT_MS)
    assert "with its vision projector" in panel.files_view.download_button.toolTip()
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(panel.files_view.download_button, Qt.MouseButton.LeftButton)
    (row,) = panel.downloads.rows()
    assert row.state == "finished" and row.total == pair[0].stat().st_size + pair[1].stat().st_size
    model = cove_core.library.get(row.model_name)
    assert model.vision and Path(model.mmproj_path or "").read_bytes() == pair[1].read_bytes()
    installed = {r[0]: r for r in panel.installed_view.rows()}
    assert installed[model.name][3] == "llama · vision"
    assert installed["tiny-llama"][3] == "llama"  # the text model is not marked
    assert dict((r[0], r[3]) for r in panel.files_view.rows())[f"{FILE} · vision"] == "Installed"


def test_a_dropped_pair_imports_as_one_model_and_a_projector_alone_is_refused(qtbot, vision_panel, cove_core, pair):
    panel = vision_panel
    with qtbot.waitSignal(panel.importer.failed, timeout=WAIT_MS):
        panel.import_files([str(pair[1])])
    assert "mmproj.gguf is a vision projector" in panel.message_text()
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        panel.import_files([str(pair[1]), str(pair[0])])
    model = cove_core.library.get("text_model")
    assert model.vision and model.mmproj_path == str(pair[1])


def test_the_catalog_marks_its_vision_models(qtbot, cove_core):
    panel = make_panel(qtbot, cove_core)
    names = [name for name, _fit in panel.catalog_view.rows()]
    vision = [e.name for e in load_catalog() if e.vision]
    assert len(vision) >= 3
    assert all(f"{n} · vision" in names for n in vision)
    assert "Qwen2.5 0.5B Instruct" in names  # a text model keeps its plain name


def test_the_picker_marks_a_vision_model(qtbot, cove_core, pair):
    text = cove_core.library.get("tiny-llama")
    seeing = replace(text, name="seeing", mmproj_path=str(pair[1]), mmproj_size=pair[1].stat().st_size)
    picker = ModelPicker()
    qtbot.addWidget(picker)
    picker.set_models([text, seeing], current=None)
    labels = {picker.combo.itemData(i): picker.combo.itemText(i) for i in range(picker.combo.count())}
    assert labels["seeing"].endswith(" · vision") and "vision" not in labels["tiny-llama"]
    index = picker.combo.findData("seeing")
    assert str(pair[1]) in str(picker.combo.itemData(index, Qt.ItemDataRole.ToolTipRole))
