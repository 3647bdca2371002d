"""A small base model (no chat template, no instruct name) is called what it is, in the model
picker and on the welcome page; an instruct model is not."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from models.catalog import load_catalog
from models.library import InstalledModel
from ui.chat.model_picker import BASE_MODEL_NOTE, ModelPicker
from ui.shell.welcome_page import WelcomePage


def installed(name: str, template: bool) -> InstalledModel:
    return InstalledModel(
        name=name,
        path=f"/models/{name}.gguf",
        sha256="0" * 64,
        size=253_000_000,
        mtime=0.0,
        quant="Q4_K_M",
        architecture="gemma3",
        parameter_count=268_000_000,
        context_length=32768,
        has_chat_template=template,
        source="starter",
        repo=None,
        file=None,
        revision=None,
        added_at="2025-05-01T09:30:00.000Z",
        last_used_at=None,
    )


STARTER = installed("gemma-3-270m-q4_k_m", template=False)
INSTRUCT = installed("qwen2.5-0.5b-instruct-q4_k_m", template=True)
INSTRUCT_NO_TEMPLATE = installed("gemma-3-270m-it-q4_k_m", template=False)


def test_the_picker_says_a_base_model_continues_text_and_an_instruct_model_answers_better(qtbot) -> None:
    picker = ModelPicker()
    qtbot.addWidget(picker)
    picker.show()
    picker.set_models([STARTER, INSTRUCT, INSTRUCT_NO_TEMPLATE], current=None)
    tips = [picker.combo.itemData(i, Qt.ItemDataRole.ToolTipRole) for i in range(3)]
    assert BASE_MODEL_NOTE in tips[0] and "base model" in BASE_MODEL_NOTE and "instruct model" in BASE_MODEL_NOTE
    assert BASE_MODEL_NOTE not in tips[1] and BASE_MODEL_NOTE not in tips[2]
    assert picker.status_text() == ""
    picker.set_loading(STARTER.name, True)
    picker.set_loaded(STARTER.name)
    assert picker.status_text() == BASE_MODEL_NOTE and picker.status_label.isVisible()
    picker.set_loaded(INSTRUCT.name)
    assert picker.status_text() == ""


def test_the_welcome_page_says_the_starter_is_a_small_base_model(qtbot) -> None:
    page = WelcomePage(database=Path("/tmp/cove.db"), catalog=load_catalog(), total_ram=16 * 1000**3)
    qtbot.addWidget(page)
    page.set_model_state(ready=True, name=STARTER.name, preparing=False, base=True)
    text = page.starter_status.text()
    assert "small base model" in text and "continues text" in text and "instruct model" in text
    page.set_model_state(ready=True, name=INSTRUCT.name, preparing=False)
    assert "base model" not in page.starter_status.text()


def test_the_welcome_page_in_the_window_names_the_base_model(qtbot, cove_core, fake_engine) -> None:
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    controller = ChatController(cove_core, fake_engine)
    window = MainWindow(
        controller, state_file=cove_core.paths.data_dir / "window.ini", presets_file=cove_core.paths.data_dir / "presets.json"
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    assert controller.model is not None and not controller.model.has_chat_template  # the tiny test model
    page = window.welcome.page
    assert page is not None and "small base model" in page.starter_status.text()
