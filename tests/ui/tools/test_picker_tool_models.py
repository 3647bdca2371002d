"""The model picker marks the installed models that can call tools (their chat template knows
tools), read from the model files off the UI thread."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from tests.support.remote_window import make_window
from tests.support.tiny_model import write_tiny_gguf
from tests.ui.tools.conftest import WAIT_MS
from tests.ui.tools.test_tools_window import HERMES_TEMPLATE
from ui.chat.model_picker import TOOLS_MARK


def _label(window, name: str) -> str:
    combo = window.picker.combo  # the rows as the person sees them
    return combo.itemText(combo.findData(name))


def test_the_picker_marks_the_models_that_can_call_tools(qtbot, cove_core, fake_engine, tmp_path: Path) -> None:
    capable = cove_core.library.import_file(write_tiny_gguf(tmp_path / "tiny-hermes.gguf", chat_template=HERMES_TEMPLATE))
    window = make_window(qtbot, cove_core, fake_engine)
    qtbot.waitUntil(lambda: _label(window, capable.name).endswith(TOOLS_MARK), timeout=WAIT_MS)
    assert window.picker.tool_models == {capable.name: "hermes"}
    assert not _label(window, "tiny-llama").endswith(TOOLS_MARK)  # no template: it does not know tools
    combo = window.picker.combo
    tip = combo.itemData(combo.findData(capable.name), Qt.ItemDataRole.ToolTipRole)
    assert "Can call tools" in tip and "hermes" in tip
    window.refresh_models()  # listed again: the mark stays
    assert _label(window, capable.name).endswith(TOOLS_MARK)
