"""Pictures of the history's images for the window: `load_picture` reads an image's file from the
images folder (its bytes must still hash to its name), decodes it with the one checker
(app/images/checks.py) and scales it, on a worker thread; `ThumbnailCache` keeps scaled QPixmaps by
image and size, so painting a row never reads or decodes a file.

Threading invariant: `load_picture` makes a QImage only; the QPixmap is made on the UI thread when
the result arrives. At most LOADS_AT_ONCE loads run at a time, the rest wait their turn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from PySide6.QtCore import QObject, QSize, Qt
from PySide6.QtGui import QImage, QPixmap

from app.images.checks import MAX_BYTES, ImageRefused, check_image
from app.images.store import ImageMissing, ImageStore, read_image
from app.store.message_images import KeptImage
from ui.background import run_in_background

LOADS_AT_ONCE = 2
CACHE_SIZE = 256  # thumbnails kept (a 220 × 140 one at twice the pixels is about 500 kB)


class PictureUnavailable(Exception):
    """An image that cannot be shown; the message is one sentence."""


def missing_sentence(sha256: str) -> str:
    return f"This image ({sha256[:12]}…) is no longer in Cove's images folder, so it cannot be shown."


def load_picture(store: ImageStore | None, image: KeptImage, size: QSize) -> QImage:
    """`image` from `store`, scaled to fit `size` (never enlarged); PictureUnavailable says why
    not. Runs on a worker thread."""
    path = store.path(image.sha256) if store is not None else None
    if path is None:
        raise PictureUnavailable(missing_sentence(image.sha256))
    try:
        data = read_image(path, image.sha256, max_bytes=MAX_BYTES)
        checked = check_image(data, label=f"The image {image.sha256[:12]}…")
    except ImageMissing as exc:
        text = str(exc)
        raise PictureUnavailable(text[:1].upper() + text[1:] + ".") from None
    except ImageRefused as exc:
        raise PictureUnavailable(f"{exc}.") from None
    full = QImage(checked.rgb, checked.width, checked.height, checked.width * 3, QImage.Format.Format_RGB888)
    if checked.width <= size.width() and checked.height <= size.height():
        return full.copy()  # a QImage that owns its pixels (the one above borrows `rgb`)
    return full.scaled(size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, PictureUnavailable) else f"This image could not be shown ({exc})."


class ThumbnailCache:
    """Scaled pictures of the history's images by (sha256, pixel size). `pixmap()` answers from the
    cache or starts a load and answers None; `on_loaded()` is called when one arrives, and
    `problem(sha256)` says why an image could not be loaded."""

    def __init__(self, owner: QObject, on_loaded: Callable[[], None]) -> None:
        self._owner = owner
        self._on_loaded = on_loaded
        self.store: ImageStore | None = None
        self._pixmaps: OrderedDict[tuple[str, int, int], QPixmap] = OrderedDict()
        self._problems: dict[str, str] = {}
        self._queued: OrderedDict[tuple[str, int, int], KeptImage] = OrderedDict()
        self._running: set[tuple[str, int, int]] = set()
        self._generation = 0  # a load started before the store changed is thrown away
        self.loads_done = 0  # public counter: pictures loaded (or refused)

    def set_store(self, store: ImageStore | None) -> None:
        self.store = store
        self._generation += 1
        self._pixmaps.clear()
        self._problems.clear()
        self._queued.clear()
        self._running.clear()

    def problem(self, sha256: str) -> str | None:
        return self._problems.get(sha256)

    def pixmap(self, image: KeptImage, size: QSize, dpr: float) -> QPixmap | None:
        """The thumbnail of `image` for a box of `size` (device-independent pixels) on a screen of
        `dpr`; None while it loads or when it cannot be shown (see `problem`)."""
        if image.sha256 in self._problems:
            return None
        key = (image.sha256, max(1, round(size.width() * dpr)), max(1, round(size.height() * dpr)))
        hit = self._pixmaps.get(key)
        if hit is not None:
            self._pixmaps.move_to_end(key)
            return hit
        if key not in self._running and key not in self._queued:
            self._queued[key] = image
            self._start_loads()
        return None

    def _start_loads(self) -> None:
        while self._queued and len(self._running) < LOADS_AT_ONCE:
            key, image = self._queued.popitem(last=False)
            self._running.add(key)
            self._load(key, image)

    def _load(self, key: tuple[str, int, int], image: KeptImage) -> None:
        store, generation = self.store, self._generation
        size = QSize(key[1], key[2])

        def done(picture: QImage) -> None:
            if generation == self._generation:
                self._running.discard(key)
                self._pixmaps[key] = QPixmap.fromImage(picture)  # drawn into the box, whatever the screen's pixel ratio
                if len(self._pixmaps) > CACHE_SIZE:
                    self._pixmaps.popitem(last=False)
                self._arrived()

        def failed(sentence: str) -> None:
            if generation == self._generation:
                self._running.discard(key)
                self._problems[image.sha256] = sentence
                self._arrived()

        run_in_background(
            self._owner, lambda: load_picture(store, image, size), on_done=done, on_failed=failed, describe=_describe, name="cove-thumbnail"
        )

    def _arrived(self) -> None:
        self.loads_done += 1
        self._start_loads()
        self._on_loaded()
