"""A message's image shown larger: a dialog that loads the picture from the images folder off the
UI thread (ui/conversation/thumbnails.py load_picture) and shows it scaled to fit, never enlarged;
Esc or Close shuts it. A picture that cannot be shown says why."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QImage, QPixmap, QResizeEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.images.store import ImageStore
from app.store.message_images import KeptImage
from ui.background import run_in_background
from ui.conversation.thumbnails import PictureUnavailable, load_picture

LARGEST = 4096  # the picture is decoded at most this many pixels on its longer side
SCREEN_SHARE = 0.8  # the dialog opens at most this share of the screen


class ImageViewer(QDialog):
    """Shows `image` from `store`; `picture` is the label it is drawn in (for tests)."""

    def __init__(self, store: ImageStore | None, image: KeptImage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.image = image
        self.setWindowTitle(f"Image · {image.describe()}")
        self.setAccessibleName("Image")
        self.setAccessibleDescription(image.describe())
        self._full: QPixmap | None = None
        self.problem: str | None = None
        self.picture = QLabel("Loading…", self)
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(QSize(120, 90))
        self.picture.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)  # the pixmap never sizes the dialog
        self.picture.setAccessibleName(image.describe())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.picture, 1)
        layout.addWidget(buttons)
        self.resize(self._first_size())
        scale = min(1.0, LARGEST / max(image.width, image.height, 1))
        size = QSize(max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        run_in_background(
            self,
            lambda: load_picture(store, image, size),
            on_done=self._loaded,
            on_failed=self._failed,
            describe=lambda exc: str(exc) if isinstance(exc, PictureUnavailable) else f"This image could not be shown ({exc}).",
            name="cove-image-viewer",
        )

    @property
    def loaded(self) -> bool:
        return self._full is not None or self.problem is not None

    def _first_size(self) -> QSize:
        """The picture's own size plus the button row, within SCREEN_SHARE of the screen."""
        screen = (self.parentWidget() or self).screen().availableGeometry()
        width = min(round(screen.width() * SCREEN_SHARE), self.image.width + 40)
        height = min(round(screen.height() * SCREEN_SHARE), self.image.height + 90)
        return QSize(max(320, width), max(240, height))

    def _loaded(self, picture: QImage) -> None:
        self._full = QPixmap.fromImage(picture)
        self.picture.setText("")
        self._fit()

    def _failed(self, sentence: str) -> None:
        self.problem = sentence
        self.picture.setWordWrap(True)
        self.picture.setText(sentence)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        if self._full is None:
            return
        box = self.picture.contentsRect().size()
        full = self._full
        if full.width() <= box.width() and full.height() <= box.height():
            self.picture.setPixmap(full)
        else:
            self.picture.setPixmap(full.scaled(box, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation))
