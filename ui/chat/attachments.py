"""Images the person attaches to a message before sending it: what one is (`Attachment`), how its
bytes are checked and made into a thumbnail off the UI thread (`read_attachment`), and which images
a drop or a paste carries (`images_in`).

Threading invariant: `read_attachment` runs on a worker thread and touches no widget; it makes
QImages only (a QPixmap belongs to the UI thread). Every refusal is an ImageRefused whose message
is one sentence naming the image (app/images/checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QSize, Qt
from PySide6.QtGui import QImage, QImageWriter, QPixmap

from app.images.checks import MAX_BYTES, CheckedImage, ImageRefused, amount, check_image, check_image_file, printable
from app.store.message_images import KeptImage

THUMB = 64  # the composer's thumbnails fit a square this many pixels on a side
# The MIME types whose bytes a drop or paste may carry as they are (no re-encoding).
_RAW_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
FILE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.gif);;All files (*)"


@dataclass(frozen=True)
class Attachment:
    """An image checked and ready to send: its identity as the history keeps it, the file's bytes
    (written to the images folder when the message is sent) and a small thumbnail."""

    image: KeptImage
    data: bytes = field(repr=False)
    thumbnail: QImage = field(repr=False, compare=False)
    label: str = "image"  # the file's name, or "pasted image"

    @property
    def sha256(self) -> str:
        return self.image.sha256

    def describe(self) -> str:
        """ "shot.png · PNG, 640×480, 12.3 kB" for a tooltip."""
        return f"{self.label} · {self.image.describe()}"


@dataclass(frozen=True)
class Source:
    """Where an attachment's bytes come from: a file, bytes already read, or a QImage to encode
    as PNG (a pasted picture). Exactly one is set."""

    label: str
    path: Path | None = None
    data: bytes | None = field(default=None, repr=False)
    image: QImage | None = field(default=None, repr=False, compare=False)


def read_attachment(source: Source) -> Attachment:
    """Check `source` (app/images/checks.py: type by content, bytes and pixels within the limits)
    and make its thumbnail; ImageRefused with one sentence otherwise. Runs on a worker thread."""
    if source.path is not None:
        data = _read_file(source.path)
        checked = check_image_file(source.path) if data is None else check_image(data, label=source.label)
        data = data if data is not None else source.path.read_bytes()
    elif source.image is not None:
        data = png_bytes(source.image, source.label)
        checked = check_image(data, label=source.label)
    else:
        data = source.data or b""
        checked = check_image(data, label=source.label)
    image = KeptImage(checked.sha256, checked.mime, checked.width, checked.height, checked.size)
    return Attachment(image, data, thumbnail_of(checked, THUMB), source.label)


def _read_file(path: Path) -> bytes | None:
    """The file's bytes when it is small enough to read whole, else None (check_image_file then
    says why, from its size, before reading it)."""
    try:
        if path.is_file() and path.stat().st_size <= MAX_BYTES:
            return path.read_bytes()
    except OSError:
        return None
    return None


def png_bytes(image: QImage, label: str) -> bytes:
    """`image` encoded as PNG; ImageRefused when it cannot be, or is larger than an image may be."""
    if image.isNull():
        raise ImageRefused(f"{printable(label)} holds no picture")
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QImageWriter(buffer, QByteArray(b"png"))
    if not writer.write(image):
        raise ImageRefused(f"{printable(label)} could not be made into a PNG ({writer.errorString()})")
    data = bytes(buffer.data().data())
    if len(data) > MAX_BYTES:
        raise ImageRefused(f"{printable(label)} is {amount(len(data))} as a PNG; an image may be at most {amount(MAX_BYTES)}")
    return data


def thumbnail_of(checked: CheckedImage, side: int) -> QImage:
    """The checked image's pixels (already turned by their EXIF orientation) scaled to fit a
    square `side` pixels on a side (never enlarged); a QImage that owns its pixels."""
    full = QImage(checked.rgb, checked.width, checked.height, checked.width * 3, QImage.Format.Format_RGB888)
    if checked.width <= side and checked.height <= side:
        return full.copy()
    return full.scaled(QSize(side, side), Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


def images_in(mime: QMimeData) -> tuple[list[Source], list[str]]:
    """The images a drop or a paste carries, and a sentence for each thing it carries that Cove
    will not take (a link to a picture: Cove never fetches one). Image bytes first (as they are,
    else the picture encoded as PNG), else local files; ([], []) when it carries none of these
    (plain text is pasted as text)."""
    for kind in _RAW_TYPES:
        if mime.hasFormat(kind):
            data = bytes(mime.data(kind).data())
            if data:
                return [Source("the pasted image", data=data)], []
    if mime.hasImage():
        picture = mime.imageData()
        if isinstance(picture, QPixmap):  # some platforms' clipboards hold a pixmap
            picture = picture.toImage()
        if isinstance(picture, QImage) and not picture.isNull():
            return [Source("the pasted image", image=picture.copy())], []
    if not mime.hasUrls():
        return [], []
    sources: list[Source] = []
    refused: list[str] = []
    for url in mime.urls():
        if url.isLocalFile():
            path = Path(url.toLocalFile())
            sources.append(Source(printable(path.name or str(path)), path=path))
        elif url.scheme():
            host = f" on {url.host()}" if url.host() else ""
            refused.append(f"Cove does not fetch pictures from links ({url.scheme()}{host}); save the picture and attach the file instead.")
    return sources, refused


def mime_has_images(mime: QMimeData) -> bool:
    """Whether a drop or a paste carries image bytes, a picture or files (see images_in)."""
    if any(mime.hasFormat(kind) for kind in _RAW_TYPES) or mime.hasImage():
        return True
    return mime.hasUrls() and any(url.isLocalFile() for url in mime.urls())
