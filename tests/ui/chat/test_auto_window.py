"""Auto in the window (ui/chat/auto_mode.py), on the scripted fake engine with two tiny models that
declare 0.5 B and 1.5 B parameters: the picker lists Auto first; on Auto, code goes to the smaller
model and a short factual question (in a new conversation) to the larger one, each reply's params
keep the choice and its line in the window says "auto → MODEL: why"; Auto stays on from message to
message and across a restart; a message with an image when no model can see images gets the
sentence and nothing is written; choosing a model leaves Auto."""

from __future__ import annotations

import io

import pytest
from PIL import Image as PILImage

from app.remote.remote_model import RemoteModel
from app.routing.auto import AUTO
from tests.support.auto_window import CODE, FACT
from tests.support.auto_window import finished as _finished
from tests.support.auto_window import shown_line as _shown_line
from tests.support.remote_window import choose, make_window, send
from ui.chat.model_picker import AUTO_LABEL, ModelPicker

pytestmark = pytest.mark.timeout(180)


def test_auto_is_first_and_chooses_per_message(qtbot, cove_core, fake_engine, two_sizes) -> None:
    small, large = two_sizes
    window = make_window(qtbot, cove_core, fake_engine)
    combo = window.picker.combo
    assert window.picker.names()[0] == AUTO and combo.itemText(0) == AUTO_LABEL
    assert AUTO not in window.picker.model_names()
    choose(window, AUTO)
    assert window.controller.auto.on and window.picker.auto()
    assert combo.currentData() == AUTO  # the picker shows Auto as the choice
    assert cove_core.settings.last_model == AUTO  # remembered for the next start

    code = _finished(qtbot, window, CODE)
    assert code.status in ("complete", "length") and code.model_name == small
    saved = cove_core.history.get_message(code.id)
    assert saved.params[AUTO]["chosen"] == small and saved.params[AUTO]["kind"] == "code"
    line = _shown_line(window, code.id)
    assert line.startswith(f"auto → {small}: code") and " · TTFT " in line
    assert combo.currentData() == AUTO  # still on Auto after the reply (and the load it needed)

    window.new_chat()
    fact = _finished(qtbot, window, FACT)
    assert fact.model_name == large
    assert cove_core.history.get_message(fact.id).params[AUTO]["chosen"] == large
    assert _shown_line(window, fact.id).startswith(f"auto → {large}: a short question")
    assert window.controller.auto.on and combo.currentData() == AUTO

    # A restart reopens on Auto.
    again = make_window(qtbot, cove_core, fake_engine)
    assert again.controller.auto.on and again.picker.combo.currentData() == AUTO
    assert _shown_line(again, fact.id).startswith(f"auto → {large}: ")  # the reopened conversation says it too

    # Choosing a model leaves Auto; its replies keep no choice.
    choose(window, small)
    assert not window.controller.auto.on and not window.picker.auto()
    assert cove_core.settings.last_model == small
    plain = _finished(qtbot, window, FACT)
    assert plain.model_name == small and AUTO not in cove_core.history.get_message(plain.id).params
    assert not _shown_line(window, plain.id).startswith("auto")


def test_an_image_no_model_can_see_is_a_sentence_and_nothing_is_written(qtbot, cove_core, fake_engine, two_sizes, tmp_path) -> None:
    window = make_window(qtbot, cove_core, fake_engine)
    choose(window, AUTO)
    picture = tmp_path / "receipt.png"
    out = io.BytesIO()
    PILImage.new("RGB", (64, 48), (30, 90, 200)).save(out, format="PNG")
    picture.write_bytes(out.getvalue())
    window.composer.attach_files([picture])
    qtbot.waitUntil(lambda: not window.composer.is_checking_images(), timeout=5000)
    errors: list[str] = []
    window.controller.error_reported.connect(errors.append)
    send(qtbot, window, "What does this receipt total?")
    assert errors == ["This request has images, and none of your models can see images: install a vision model (one with an mmproj file)."]
    assert window.notice.text() == errors[0]
    assert cove_core.history.list_conversations() == []  # nothing written
    assert window.composer.text() == "What does this receipt total?"
    assert not window.controller.busy and window.controller.auto.on


def test_the_picker_offers_auto_only_with_a_model_to_choose(qtbot, cove_core) -> None:
    picker = ModelPicker()
    qtbot.addWidget(picker)
    box = RemoteModel(connection="box", model_id="llama3.1:70b", host="box.lan:11434", kind="ollama")
    picker.set_models([], current=None, remote=[], auto=True)  # nothing for Auto to choose
    assert AUTO not in picker.names()
    picker.set_models([], current=None, remote=[box], auto=True)  # a server's model is one
    assert picker.names() == [AUTO, box.name]
    installed = cove_core.library.list()
    picker.set_models(installed, current=installed[0].name, remote=[box], auto=True)
    assert picker.names() == [AUTO, installed[0].name, box.name]
    assert [picker.combo.itemText(i) for i in (1, 2)] == ["", "This computer"]  # Auto, a separator, then the computer
    chosen: list[str] = []
    picker.model_chosen.connect(chosen.append)
    picker.combo.activated.emit(0)
    picker.set_auto(True)
    assert chosen == [AUTO] and picker.combo.currentIndex() == 0
    picker.combo.activated.emit(0)  # on Auto already: nothing
    loaded = picker.combo.findData(installed[0].name)
    picker.combo.activated.emit(loaded)  # the loaded model, chosen while on Auto, leaves Auto
    assert chosen == [AUTO, installed[0].name]
