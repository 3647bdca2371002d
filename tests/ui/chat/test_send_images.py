"""Sending images from the window: to a model that cannot see, the send is refused before anything is
written and the text and images stay in the composer; to a vision model (the tiny one,
tests/support/tiny_vision.py, on the real engine) the message is committed with its images (their
files in the history's images folder), the strip empties, and the conversation shows the thumbnails,
again after a restart on the same database. A dropped picture and a question get a reply."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image as PILImage
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.core import Core, open_core
from app.engine.client import EngineClient
from app.settings import SamplingParams
from models.library import InstalledModel
from tests.support.tiny_vision import write_tiny_vision
from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow

pytestmark = pytest.mark.timeout(180)


def png(color: tuple[int, int, int] = (30, 90, 200), size: tuple[int, int] = (320, 200)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def _window(qtbot, core: Core, engine: EngineClient) -> MainWindow:
    controller = ChatController(core, engine)
    window = MainWindow(controller, state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json")
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window


def _vision_model(core: Core, folder: Path) -> InstalledModel:
    """The tiny vision pair, imported as one model and chosen; replies of a few tokens."""
    core.save_sampling_defaults(SamplingParams(max_tokens=4, seed=1))
    text, mmproj = write_tiny_vision(folder)
    model = core.library.import_file(text, mmproj=mmproj)
    assert model.mmproj_path
    core.remember_model(model)
    return model


def _attach(qtbot, window: MainWindow, path: Path) -> None:
    window.composer.attach_files([path])
    qtbot.waitUntil(lambda: not window.composer.is_checking_images(), timeout=5000)
    assert [a.label for a in window.composer.attachments()] == [path.name]


def _type_and_send(qtbot, window: MainWindow, text: str) -> None:
    box = window.composer.text_box
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)


def test_a_model_that_cannot_see_refuses_before_anything_is_written(qtbot, cove_core, fake_engine, tmp_path) -> None:
    window = _window(qtbot, cove_core, fake_engine)
    picture = tmp_path / "receipt.png"
    picture.write_bytes(png())
    _attach(qtbot, window, picture)
    _type_and_send(qtbot, window, "total?")
    assert window.notice.text() == (
        "tiny-llama cannot see images: it has no vision projector (mmproj); send text only, or use a vision model. "
        "Your message and its images stay in the box."
    )
    assert window.composer.text() == "total?"
    assert [a.label for a in window.composer.attachments()] == ["receipt.png"]
    assert cove_core.history.list_conversations() == []  # nothing written
    assert cove_core.history.images is not None and cove_core.history.images.holds() == set()
    assert not window.controller.busy
    window.close()


def test_a_vision_model_gets_the_message_with_its_images_and_the_view_shows_them(qtbot, cove_core, tmp_path) -> None:
    model = _vision_model(cove_core, tmp_path / "vision")
    window = _window(qtbot, cove_core, EngineClient())
    assert window.controller.model is not None and window.controller.model.name == model.name
    first, second = tmp_path / "one.png", tmp_path / "two.jpg"
    first.write_bytes(png((200, 20, 20)))
    PILImage.new("RGB", (90, 120), (20, 160, 20)).save(second, format="JPEG")
    _attach(qtbot, window, first)
    window.composer.attach_files([second])
    qtbot.waitUntil(lambda: len(window.composer.attachments()) == 2, timeout=5000)
    sent = [a.image for a in window.composer.attachments()]
    with qtbot.waitSignal(window.controller.reply_finished, timeout=120000) as done:
        _type_and_send(qtbot, window, "what do these show?")
    assert done.args[0].status in {"complete", "length"}, done.args[0].error
    assert done.args[0].metrics.get("images") == 2
    # committed with its images, in order; their files are in the images folder
    user = cove_core.history.messages(window.controller.conversation_id)[0]
    assert user.content == "what do these show?" and list(user.images) == sent
    store = cove_core.history.images
    assert store is not None
    for image, path in zip(sent, (first, second)):
        kept = store.path(image.sha256)
        assert kept is not None and kept.read_bytes() == path.read_bytes()
    # the composer is empty again, text and strip alike
    assert window.composer.text() == "" and window.composer.attachments() == []
    assert not window.composer.attachment_strip.isVisible()
    # the conversation shows the thumbnails, loaded off the UI thread
    item = window.view.conversation_model().items()[0]
    assert item.images == tuple(sent)
    thumbnails = window.view.message_delegate().thumbnails
    qtbot.waitUntil(lambda: thumbnails.loads_done >= 2, timeout=5000)
    assert thumbnails.problem(sent[0].sha256) is None and thumbnails.problem(sent[1].sha256) is None
    # Edit puts the message's text and images back in the composer, read from the images folder
    window._begin_edit(user.id)
    qtbot.waitUntil(lambda: len(window.composer.attachments()) == 2 and not window.composer.is_checking_images(), timeout=5000)
    assert window.composer.text() == "what do these show?"
    assert [a.image for a in window.composer.attachments()] == sent
    assert [a.label for a in window.composer.attachments()] == ["image 1", "image 2"]
    window.close()


def test_images_alone_are_a_message(qtbot, cove_core, tmp_path) -> None:
    _vision_model(cove_core, tmp_path / "vision")
    window = _window(qtbot, cove_core, EngineClient())
    picture = tmp_path / "alone.png"
    picture.write_bytes(png())
    _attach(qtbot, window, picture)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=120000) as done:
        qtbot.keyClick(window.composer.text_box, Qt.Key.Key_Return)
    assert done.args[0].status in {"complete", "length"}, done.args[0].error
    user = cove_core.history.messages(window.controller.conversation_id)[0]
    assert user.content == "" and len(user.images) == 1
    assert window.windowTitle() == "Cove — New chat"
    window.close()


def test_reopened_after_a_restart_the_conversation_shows_its_images(qtbot, cove_core, tmp_path) -> None:
    _vision_model(cove_core, tmp_path / "vision")
    window = _window(qtbot, cove_core, EngineClient())
    picture = tmp_path / "screen.png"
    picture.write_bytes(png(size=(800, 500)))
    _attach(qtbot, window, picture)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=120000):
        _type_and_send(qtbot, window, "what is on my screen?")
    conversation_id = window.controller.conversation_id
    assert conversation_id is not None
    sha = cove_core.history.messages(conversation_id)[0].images[0].sha256
    window.close()

    again = open_core(cove_core.paths)  # a new start on the same database and images folder
    try:
        reopened = _window(qtbot, again, EngineClient())
        assert reopened.controller.conversation_id == conversation_id
        item = reopened.view.conversation_model().items()[0]
        assert [i.sha256 for i in item.images] == [sha] and (item.images[0].width, item.images[0].height) == (800, 500)
        thumbnails = reopened.view.message_delegate().thumbnails
        qtbot.waitUntil(lambda: thumbnails.loads_done >= 1, timeout=5000)
        assert thumbnails.problem(sha) is None
        # a text model now: the conversation's images cannot go to it, so it says so first
        reopened._choose_model("tiny-llama")
        before = again.history.get_conversation(conversation_id).message_count
        _type_and_send(qtbot, reopened, "and now?")
        assert reopened.notice.text().startswith("This conversation holds images, and tiny-llama cannot see images")
        assert reopened.composer.text() == "and now?"
        assert again.history.get_conversation(conversation_id).message_count == before
        reopened.close()
    finally:
        again.close()


def test_a_dropped_screenshot_and_a_question_get_a_reply_from_the_real_engine(qtbot, cove_core, tmp_path) -> None:
    """Issue 51's "done when", in the window: a picture dropped on the composer of a conversation
    with a vision model, a question, and the real engine's reply (the tiny model's words are random)."""
    _vision_model(cove_core, tmp_path / "vision")
    engine = EngineClient()
    window = _window(qtbot, cove_core, engine)
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(png((240, 240, 240), size=(1280, 800)))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(shot))])
    viewport = window.composer.text_box.viewport()
    at, copy, left, none = viewport.rect().center(), Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    QApplication.sendEvent(viewport, QDragEnterEvent(at, copy, mime, left, none))
    QApplication.sendEvent(viewport, QDropEvent(QPointF(at), copy, mime, left, none))
    qtbot.waitUntil(lambda: len(window.composer.attachments()) == 1, timeout=5000)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=150000) as done:
        _type_and_send(qtbot, window, "What does this screenshot show?")
    final = done.args[0]
    assert final.status in {"complete", "length"}, final.error
    assert final.metrics.get("gen_tokens", 0) >= 1
    assert final.metrics.get("images") == 1
    user = cove_core.history.messages(window.controller.conversation_id)[0]
    assert len(user.images) == 1 and user.images[0].width == 1280
    window.close()
