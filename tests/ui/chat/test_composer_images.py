"""Images in the composer: attached through the Attach button's files, a drop and a paste, each checked
off the UI thread; a refused one says its sentence and attaches nothing; thumbnails with a remove
button and a tooltip; a message of images alone may be sent; sending waits for an image still
being checked."""

from __future__ import annotations

import io

import pytest
from PIL import Image as PILImage
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication

from ui.chat.composer import Composer


def png(color: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (40, 30)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def composer(qtbot) -> Composer:
    widget = Composer()
    qtbot.addWidget(widget)
    widget.resize(600, 200)
    widget.show()
    return widget


def attached(qtbot, composer: Composer, n: int) -> None:
    qtbot.waitUntil(lambda: not composer.is_checking_images(), timeout=5000)
    assert len(composer.attachments()) == n


def drop(widget, mime: QMimeData) -> QDropEvent:
    """A drag over `widget` and a drop on it, as Qt delivers them."""
    pos = widget.rect().center()
    enter = QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted()
    event = QDropEvent(QPointF(pos), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)
    return event


def test_a_file_attached_shows_a_thumbnail_with_its_description_and_can_be_removed(qtbot, composer, tmp_path) -> None:
    path = tmp_path / "shot.png"
    path.write_bytes(png(size=(640, 480)))
    assert not composer.attachment_strip.isVisible()
    composer.attach_files([path])
    assert composer.is_checking_images()
    attached(qtbot, composer, 1)
    attachment = composer.attachments()[0]
    assert attachment.image.mime == "image/png" and (attachment.image.width, attachment.image.height) == (640, 480)
    assert attachment.data == path.read_bytes()
    assert attachment.thumbnail.width() == 64 and attachment.thumbnail.height() == 48  # fits 64 × 64, its own shape
    strip = composer.attachment_strip
    assert strip.isVisible() and not strip.note.isVisible()
    (tile,) = strip.tiles()
    assert tile.toolTip() == f"shot.png · PNG, 640×480, {attachment.image.describe().split(', ')[-1]}"
    assert tile.accessibleName() == "Attached image: shot.png"
    qtbot.mouseClick(tile.remove_button, Qt.MouseButton.LeftButton)
    assert composer.attachments() == []
    assert not strip.isVisible()


def test_the_attach_button_takes_the_files_the_dialog_returns(qtbot, composer, tmp_path) -> None:
    files = [tmp_path / "a.png", tmp_path / "b.png"]
    files[0].write_bytes(png((1, 2, 3)))
    files[1].write_bytes(png((4, 5, 6)))
    composer.choose_files = lambda parent: [str(f) for f in files]
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    attached(qtbot, composer, 2)
    assert [a.label for a in composer.attachments()] == ["a.png", "b.png"]  # the order they were chosen in
    composer.choose_files = lambda parent: []  # the person cancelled
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    assert len(composer.attachments()) == 2


def test_a_dropped_file_is_attached_and_no_path_is_typed(qtbot, composer, tmp_path) -> None:
    path = tmp_path / "dropped.png"
    path.write_bytes(png())
    composer.set_text("what is this?")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    mime.setText(str(path))  # a file manager offers the path as text too
    event = drop(composer.text_box.viewport(), mime)
    assert event.isAccepted()
    attached(qtbot, composer, 1)
    assert composer.attachments()[0].label == "dropped.png"
    assert composer.text() == "what is this?"


def test_a_drop_beside_the_box_is_attached_too(qtbot, composer, tmp_path) -> None:
    path = tmp_path / "beside.png"
    path.write_bytes(png())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    drop(composer, mime)
    attached(qtbot, composer, 1)


def test_a_pasted_picture_is_attached_as_png(qtbot, composer) -> None:
    picture = QImage(120, 80, QImage.Format.Format_RGB32)
    picture.fill(Qt.GlobalColor.darkCyan)
    mime = QMimeData()
    mime.setImageData(picture)
    QGuiApplication.clipboard().setMimeData(mime)
    composer.text_box.setFocus()
    composer.text_box.paste()
    attached(qtbot, composer, 1)
    attachment = composer.attachments()[0]
    assert attachment.image.mime == "image/png" and (attachment.image.width, attachment.image.height) == (120, 80)
    assert attachment.data.startswith(b"\x89PNG") and attachment.label == "the pasted image"
    assert composer.text() == ""


def test_pasted_image_bytes_are_kept_as_they_are(qtbot, composer) -> None:
    jpeg = io.BytesIO()
    PILImage.new("RGB", (50, 40), (10, 200, 10)).save(jpeg, format="JPEG")
    mime = QMimeData()
    mime.setData("image/jpeg", jpeg.getvalue())
    assert composer.attach_mime(mime)
    attached(qtbot, composer, 1)
    assert composer.attachments()[0].data == jpeg.getvalue() and composer.attachments()[0].image.mime == "image/jpeg"


def test_pasted_text_is_still_text(qtbot, composer) -> None:
    mime = QMimeData()
    mime.setText("just words")
    QGuiApplication.clipboard().setMimeData(mime)
    composer.text_box.paste()
    assert composer.text() == "just words"
    assert composer.attachments() == [] and not composer.is_checking_images()


def test_a_text_file_named_png_is_refused_with_its_sentence_and_attaches_nothing(qtbot, composer, tmp_path) -> None:
    fake = tmp_path / "notes.png"
    fake.write_text("these are my notes, not a picture\n")
    composer.set_text("look at this")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(fake))])
    drop(composer.text_box.viewport(), mime)
    attached(qtbot, composer, 0)
    note = composer.attachment_strip.note
    assert note.isVisible()
    assert note.text() == "notes.png is not a PNG, JPEG, WebP or GIF picture."
    assert composer.text() == "look at this"
    # the next attachment starts afresh: the sentence goes, the good picture comes
    good = tmp_path / "good.png"
    good.write_bytes(png())
    composer.attach_files([good])
    attached(qtbot, composer, 1)
    assert note.text() == ""


def test_a_picture_over_the_pixel_limit_is_refused_before_it_is_decoded(qtbot, composer, tmp_path) -> None:
    huge = tmp_path / "huge.png"
    PILImage.new("1", (8000, 6000)).save(huge, format="PNG")  # 48 megapixels, a few kB on disk
    composer.attach_files([huge])
    attached(qtbot, composer, 0)
    assert composer.attachment_strip.note.text() == "huge.png is 8000 × 6000 pixels; an image may have at most 40 megapixels."


def test_a_link_among_dropped_files_is_never_fetched(qtbot, composer, tmp_path) -> None:
    path = tmp_path / "local.png"
    path.write_bytes(png())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)), QUrl("https://example.com/cat.png")])
    drop(composer.text_box.viewport(), mime)
    attached(qtbot, composer, 1)
    assert "Cove does not fetch pictures from links (https on example.com)" in composer.attachment_strip.note.text()


def test_the_same_picture_twice_is_attached_once(qtbot, composer, tmp_path) -> None:
    (tmp_path / "one.png").write_bytes(png())
    (tmp_path / "two.png").write_bytes(png())
    composer.attach_files([tmp_path / "one.png"])
    attached(qtbot, composer, 1)
    composer.attach_files([tmp_path / "two.png"])
    attached(qtbot, composer, 1)
    assert composer.attachment_strip.note.text() == "two.png is attached already."


def test_images_alone_may_be_sent_and_clear_empties_the_strip(qtbot, composer, tmp_path) -> None:
    (tmp_path / "only.png").write_bytes(png())
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == []  # nothing typed, nothing attached
    composer.attach_files([tmp_path / "only.png"])
    attached(qtbot, composer, 1)
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == [""]
    assert len(composer.attachments()) == 1  # only the owner's clear() drops them
    composer.clear()
    assert composer.attachments() == [] and not composer.attachment_strip.isVisible()


def test_sending_waits_for_an_image_still_being_checked(qtbot, composer, tmp_path, monkeypatch) -> None:
    import threading

    import ui.chat.attachment_draft as draft_module

    release = threading.Event()
    real = draft_module.read_attachment

    def slow(source):
        release.wait(5)
        return real(source)

    monkeypatch.setattr(draft_module, "read_attachment", slow)
    (tmp_path / "slow.png").write_bytes(png())
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    composer.set_text("with a picture")
    composer.attach_files([tmp_path / "slow.png"])
    assert "Checking 1 image…" in composer.attachment_strip.note.text()
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == []
    assert "still being checked" in composer.attachment_strip.note.text()
    release.set()
    attached(qtbot, composer, 1)
    qtbot.keyClick(composer.text_box, Qt.Key.Key_Return)
    assert sent == ["with a picture"]


def test_a_missing_file_says_so(qtbot, composer, tmp_path) -> None:
    composer.attach_files([tmp_path / "gone.png"])
    attached(qtbot, composer, 0)
    text = composer.attachment_strip.note.text()
    assert text.startswith("gone.png could not be read") and text.endswith(".")
    assert "Traceback" not in text
