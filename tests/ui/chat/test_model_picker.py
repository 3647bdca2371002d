"""Model picker: labels with quant and size, the loaded mark, choosing, loading with Cancel, errors."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.remote.remote_model import RemoteModel
from models.library import InstalledModel
from ui.chat.model_picker import ModelPicker, model_label


def installed(name: str, quant: str | None, size: int, template: bool = True) -> InstalledModel:
    return InstalledModel(
        name=name,
        path=f"/models/{name}.gguf",
        sha256="0" * 64,
        size=size,
        mtime=0.0,
        quant=quant,
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


MODELS = [
    installed("gemma-3-270m-q4_k_m", "Q4_K_M", 253_000_000),
    installed("qwen2.5-1.5b-instruct-q8_0", "Q8_0", 1_890_000_000),
    installed("mystery", None, 4_200, template=False),
]


@pytest.fixture
def picker(qtbot) -> ModelPicker:
    widget = ModelPicker()
    qtbot.addWidget(widget)
    widget.show()
    widget.set_models(MODELS, current="gemma-3-270m-q4_k_m")
    return widget


def test_items_show_quant_and_size(picker: ModelPicker) -> None:
    texts = [picker.combo.itemText(i) for i in range(picker.combo.count())]
    assert texts == [
        "gemma-3-270m-q4_k_m · Q4_K_M · 253 MB",
        "qwen2.5-1.5b-instruct-q8_0 · Q8_0 · 1.9 GB",
        "mystery · 4.2 KB",
    ]
    assert model_label(MODELS[0]) == texts[0]
    assert "No chat template" in picker.combo.itemData(2, Qt.ItemDataRole.ToolTipRole)


def test_loaded_model_is_marked_and_selected(picker: ModelPicker) -> None:
    assert picker.combo.currentIndex() == 0
    assert picker.combo.itemData(0, Qt.ItemDataRole.AccessibleTextRole).endswith("(loaded)")
    assert not picker.combo.itemData(1, Qt.ItemDataRole.AccessibleTextRole).endswith("(loaded)")
    loaded_icon = picker.combo.itemIcon(0).pixmap(12, 12).toImage()
    assert loaded_icon != picker.combo.itemIcon(1).pixmap(12, 12).toImage()
    picker.set_loaded("qwen2.5-1.5b-instruct-q8_0")
    assert picker.combo.currentIndex() == 1
    assert picker.combo.itemData(1, Qt.ItemDataRole.AccessibleTextRole).endswith("(loaded)")
    assert not picker.combo.itemData(0, Qt.ItemDataRole.AccessibleTextRole).endswith("(loaded)")


def test_choosing_a_model_emits_its_name(qtbot, picker: ModelPicker) -> None:
    chosen: list[str] = []
    picker.model_chosen.connect(chosen.append)
    picker.combo.activated.emit(0)  # already loaded: nothing to do
    assert chosen == []
    picker.combo.setCurrentIndex(1)
    picker.combo.activated.emit(1)
    assert chosen == ["qwen2.5-1.5b-instruct-q8_0"]


def test_choosing_with_the_keyboard_emits(qtbot, picker: ModelPicker) -> None:
    with qtbot.waitSignal(picker.model_chosen, timeout=1000) as blocker:
        qtbot.keyClick(picker.combo, Qt.Key.Key_Down)
    assert blocker.args == ["qwen2.5-1.5b-instruct-q8_0"]


def test_loading_shows_progress_and_cancel_emits(qtbot, picker: ModelPicker) -> None:
    assert not picker.cancel_button.isVisible() and not picker.progress_bar.isVisible()
    picker.set_loading("mystery", True)
    assert picker.cancel_button.isVisible() and picker.progress_bar.isVisible()
    assert picker.progress_bar.maximum() == 0  # indeterminate
    assert not picker.combo.isEnabled()
    assert picker.combo.currentIndex() == 2
    assert picker.status_text() == "Loading mystery…"
    with qtbot.waitSignal(picker.load_cancel_requested, timeout=1000):
        qtbot.mouseClick(picker.cancel_button, Qt.MouseButton.LeftButton)
    picker.set_loading("mystery", False)
    assert not picker.cancel_button.isVisible()
    assert picker.combo.isEnabled()
    assert picker.combo.currentIndex() == 0  # back to the model that is still loaded
    assert picker.status_text() == ""


def test_loaded_clears_loading(picker: ModelPicker) -> None:
    picker.set_loading("mystery", True)
    picker.set_loaded("mystery")
    assert not picker.cancel_button.isVisible()
    assert picker.loaded() == "mystery"
    assert picker.combo.currentIndex() == 2


def test_error_is_shown_and_combo_reverts(picker: ModelPicker) -> None:
    picker.set_loading("qwen2.5-1.5b-instruct-q8_0", True)
    sentence = "The engine stopped: out of memory while loading qwen2.5-1.5b-instruct-q8_0."
    picker.set_error(sentence)
    assert picker.status_text() == sentence
    assert picker.status_label.toolTip() == sentence
    assert picker.status_label.isVisible()
    assert not picker.cancel_button.isVisible()
    assert picker.combo.currentIndex() == 0
    picker.set_loaded("gemma-3-270m-q4_k_m")
    assert picker.status_text() == ""


def test_no_models_and_nothing_loaded(picker: ModelPicker) -> None:
    picker.set_models([], current=None)
    assert picker.combo.count() == 0
    assert picker.combo.placeholderText() == "No models installed"
    assert not picker.combo.isEnabled()
    picker.set_models(MODELS, current=None)
    assert picker.combo.currentIndex() == -1
    assert picker.combo.isEnabled()


def test_every_control_has_an_accessible_name(picker: ModelPicker) -> None:
    for widget in (picker.combo, picker.progress_bar, picker.cancel_button, picker.status_label):
        assert widget.accessibleName()


REMOTE = [
    RemoteModel(connection="gpu-box", model_id="llama3.1:70b", host="gpu-box.lan:11434", kind="ollama", fingerprint="sha256:4f2a"),
    RemoteModel(connection="gpu-box", model_id="qwen2.5:32b", host="gpu-box.lan:11434", kind="ollama"),
    RemoteModel(connection="lab", model_id="meta-llama/Llama-3.3-70B-Instruct", host="10.0.0.7:8000", kind="vllm"),
]


def test_remote_models_are_listed_under_their_connection_marked_with_the_host(picker: ModelPicker) -> None:
    picker.set_models(MODELS, current="gemma-3-270m-q4_k_m", remote=REMOTE)
    combo = picker.combo
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert texts == [
        "This computer",
        "gemma-3-270m-q4_k_m · Q4_K_M · 253 MB",
        "qwen2.5-1.5b-instruct-q8_0 · Q8_0 · 1.9 GB",
        "mystery · 4.2 KB",
        "",  # a separator
        "gpu-box · gpu-box.lan:11434",
        "llama3.1:70b · gpu-box.lan:11434",
        "qwen2.5:32b · gpu-box.lan:11434",
        "",
        "lab · 10.0.0.7:8000",
        "meta-llama/Llama-3.3-70B-Instruct · 10.0.0.7:8000",
    ]
    headings = [i for i, text in enumerate(texts) if text in ("This computer", "gpu-box · gpu-box.lan:11434", "lab · 10.0.0.7:8000")]
    for index in headings:  # a heading cannot be chosen
        assert not combo.model().item(index).isEnabled() and combo.itemData(index) is None
    assert picker.names() == [m.name for m in MODELS] + [
        "llama3.1:70b@gpu-box",
        "qwen2.5:32b@gpu-box",
        "meta-llama/Llama-3.3-70B-Instruct@lab",
    ]
    tip = combo.itemData(texts.index("llama3.1:70b · gpu-box.lan:11434"), Qt.ItemDataRole.ToolTipRole)
    assert "Your messages are sent to gpu-box.lan:11434." in tip and "sha256:4f2a" in tip
    assert combo.currentIndex() == 1  # the loaded local model


def test_choosing_a_remote_model_emits_its_name_and_it_shows_in_use(picker: ModelPicker) -> None:
    picker.set_models(MODELS, current="gemma-3-270m-q4_k_m", remote=REMOTE)
    chosen: list[str] = []
    picker.model_chosen.connect(chosen.append)
    index = picker.combo.findData("meta-llama/Llama-3.3-70B-Instruct@lab")
    picker.combo.setCurrentIndex(index)
    picker.combo.activated.emit(index)
    assert chosen == ["meta-llama/Llama-3.3-70B-Instruct@lab"]
    picker.set_loaded(chosen[0])  # nothing to load: the window marks it in use at once
    assert picker.combo.currentIndex() == index
    assert picker.combo.itemData(index, Qt.ItemDataRole.AccessibleTextRole).endswith("(in use)")
    assert not picker.combo.itemData(1, Qt.ItemDataRole.AccessibleTextRole).endswith("(loaded)")
    picker.set_models([], current=chosen[0], remote=REMOTE)  # only servers' models: no "This computer" heading
    assert picker.combo.itemText(0) == "gpu-box · gpu-box.lan:11434" and picker.combo.isEnabled()
    assert picker.combo.currentText() == "meta-llama/Llama-3.3-70B-Instruct · 10.0.0.7:8000"
