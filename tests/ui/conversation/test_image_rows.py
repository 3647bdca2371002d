"""A message's images in the conversation view: thumbnails laid out from the sizes the history keeps
(never enlarged, wrapped to the row), painted from pictures loaded off the UI thread, a placeholder
with a sentence for a file that is gone or changed, and a click that opens the image larger (Esc
closes it)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image as PILImage
from PySide6.QtCore import QRect, Qt

from app.images.checks import check_image
from app.images.store import ImageStore
from app.store.message_images import KeptImage
from ui.conversation.delegate import Hit
from ui.conversation.image_rows import IMAGE, THUMB_HEIGHT, layout_images, thumb_size
from ui.conversation.image_viewer import ImageViewer
from ui.conversation.item_model import MessageItem
from ui.conversation.view import ConversationView


def png(color: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def keep(store: ImageStore, data: bytes) -> KeptImage:
    checked = check_image(data)
    store.put(data, checked.sha256)
    return KeptImage(checked.sha256, checked.mime, checked.width, checked.height, checked.size)


def user_with(images: tuple[KeptImage, ...], text: str = "What is this?") -> MessageItem:
    return MessageItem("u1", "user", text, "complete", None, {}, images=images)


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "images")


def make_view(qtbot, items: list[MessageItem], store: ImageStore | None) -> ConversationView:
    view = ConversationView()
    qtbot.addWidget(view)
    view.set_image_store(store)
    view.resize(640, 600)
    view.conversation_model().set_messages(items)
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)
    return view


def image_rect(view: ConversationView, n: int) -> QRect:
    """Where the first row's image `n` is, in viewport coordinates."""
    index = view.model().index(0, 0)
    lay = view.message_delegate().layout_for(view.conversation_model().item(0))
    assert lay.images is not None
    return lay.images.rects[n].translated(view.visualRect(index).topLeft())


def test_thumbnails_keep_their_shape_are_never_enlarged_and_wrap() -> None:
    wide = KeptImage("a" * 64, "image/png", 1600, 400, 1000)
    small = KeptImage("b" * 64, "image/png", 32, 24, 100)
    tall = KeptImage("c" * 64, "image/png", 300, 900, 1000)
    assert thumb_size(wide, 600).width() == 220 and thumb_size(wide, 600).height() == 55
    assert (thumb_size(small, 600).width(), thumb_size(small, 600).height()) == (32, 24)
    assert (thumb_size(tall, 600).width(), thumb_size(tall, 600).height()) == (47, THUMB_HEIGHT)
    lay = layout_images([wide, small, tall, wide], 10, 300, 50)
    first, second, third, fourth = lay.rects
    assert first.top() == second.top() == 50 and second.left() == first.right() + 1 + 8
    assert third.top() > first.bottom() and third.left() == 10  # no room left on the first line
    assert fourth.top() == third.top()
    assert lay.bottom == third.bottom()


def test_a_row_with_images_is_taller_by_them_and_its_estimate_counts_them(qtbot, store) -> None:
    image = keep(store, png((200, 10, 10), (400, 300)))
    view = make_view(qtbot, [user_with((image,))], store)
    delegate = view.message_delegate()
    plain = MessageItem("u2", "user", "What is this?", "complete", None, {})
    with_image = view.conversation_model().item(0)
    grown = delegate.layout_for(with_image).height - delegate.layout_for(plain).height
    assert grown == 140 + 6  # the thumbnail (400 × 300 shown 187 × 140) and a gap
    assert (
        delegate.layouter.estimate_height(with_image, delegate.row_width()) - delegate.layouter.estimate_height(plain, delegate.row_width())
        == grown
    )


def test_thumbnails_are_painted_from_the_images_folder(qtbot, store) -> None:
    red, green = keep(store, png((220, 20, 20), (400, 300))), keep(store, png((20, 200, 20), (60, 60)))
    view = make_view(qtbot, [user_with((red, green))], store)
    thumbnails = view.message_delegate().thumbnails
    qtbot.waitUntil(lambda: thumbnails.loads_done >= 2, timeout=5000)
    qtbot.wait(20)
    shot = view.viewport().grab().toImage()
    for n, color in ((0, (220, 20, 20)), (1, (20, 200, 20))):
        center = image_rect(view, n).center()
        pixel = shot.pixelColor(round(center.x() * shot.devicePixelRatio()), round(center.y() * shot.devicePixelRatio()))
        assert (pixel.red(), pixel.green(), pixel.blue()) == color
    loads = thumbnails.loads_done
    view.viewport().repaint()
    assert thumbnails.loads_done == loads  # painted again from the cache, no file read


def test_a_missing_or_changed_file_shows_a_placeholder_that_says_why(qtbot, store) -> None:
    gone, changed = keep(store, png((1, 2, 3), (300, 200))), keep(store, png((4, 5, 6), (300, 200)))
    path = store.path(gone.sha256)
    assert path is not None
    path.unlink()
    changed_path = store.path(changed.sha256)
    assert changed_path is not None
    changed_path.write_bytes(png((9, 9, 9), (300, 200)))
    view = make_view(qtbot, [user_with((gone, changed))], store)
    thumbnails = view.message_delegate().thumbnails
    qtbot.waitUntil(lambda: thumbnails.loads_done >= 2, timeout=5000)
    assert (
        thumbnails.problem(gone.sha256) == f"This image ({gone.sha256[:12]}…) is no longer in Cove's images folder, so it cannot be shown."
    )
    assert thumbnails.problem(changed.sha256) == f"The image {changed.sha256[:12]}… was changed on disk since it was sent."
    view.viewport().repaint()  # the placeholders paint, nothing raises
    index = view.model().index(0, 0)
    hit = view.message_delegate().hit_test(index, view.visualRect(index), image_rect(view, 0).center())
    assert hit == Hit(IMAGE, "u1", "0")


def test_without_an_images_folder_every_image_says_it_is_missing(qtbot) -> None:
    image = KeptImage("d" * 64, "image/png", 100, 100, 500)
    view = make_view(qtbot, [user_with((image,), text="")], None)
    thumbnails = view.message_delegate().thumbnails
    qtbot.waitUntil(lambda: thumbnails.loads_done >= 1, timeout=5000)
    assert "no longer in Cove's images folder" in (thumbnails.problem(image.sha256) or "")


def test_a_click_opens_the_image_larger_and_esc_closes_it(qtbot, store) -> None:
    image = keep(store, png((30, 60, 200), (900, 600)))
    view = make_view(qtbot, [user_with((image,))], store)
    opened: list[ImageViewer] = []
    view.image_opened.connect(opened.append)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=image_rect(view, 0).center())
    assert len(opened) == 1
    viewer = opened[0]
    assert viewer.isVisible() and viewer.windowTitle() == f"Image · {image.describe()}"
    qtbot.waitUntil(lambda: viewer.loaded, timeout=5000)
    assert viewer.problem is None
    shown = viewer.picture.pixmap()
    assert not shown.isNull() and shown.width() <= 900
    assert abs(shown.width() / shown.height() - 1.5) < 0.02  # its own shape, scaled to fit
    qtbot.keyClick(viewer, Qt.Key.Key_Escape)
    assert not viewer.isVisible()


def test_the_viewer_of_a_missing_image_says_why(qtbot, store) -> None:
    image = KeptImage("e" * 64, "image/png", 100, 100, 500)
    view = make_view(qtbot, [user_with((image,))], store)
    viewer = view.open_image("u1", 0)
    assert viewer is not None
    qtbot.waitUntil(lambda: viewer.loaded, timeout=5000)
    assert viewer.picture.text() == viewer.problem and "no longer in Cove's images folder" in viewer.picture.text()
    viewer.close()
    assert view.open_image("u1", 5) is None


def test_the_accessible_text_names_the_images(qtbot, store) -> None:
    image = keep(store, png((1, 1, 1), (64, 48)))
    view = make_view(qtbot, [user_with((image,))], store)
    text = view.model().index(0, 0).data(Qt.ItemDataRole.AccessibleTextRole)
    assert text.startswith(f"You: [1 image: {image.describe()}] What is this?")
