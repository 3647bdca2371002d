"""One image's bytes checked and decoded: what it is (by its content, never its name), whether it is
within Cove's limits (bytes, then pixels, both before any pixel is decoded), and its first frame as
RGB pixels (EXIF orientation applied, transparency laid on white) in the layout libmtmd's
mtmd_bitmap_init reads: width * height * 3 bytes, row by row.

Everything wrong with an image is an ImageRefused whose message is one sentence naming it."""

from __future__ import annotations

import hashlib
import math
import os
import stat
import struct
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageFile, ImageOps

# OpenAI's limit for one image; the same for every way an image reaches Cove.
MAX_BYTES = 20_000_000
# 40 megapixels: a 7300 x 5475 photo; decoded RGBA that is 160 MB.
MAX_PIXELS = 40_000_000
# The longest side; a 16384 x 16 strip is allowed, a 20000 x 10 one is not.
MAX_SIDE = 16384
# One request's images together (ImageBudget): a conversation of screenshots fits; a request of
# hundreds of small files that decode to large pictures does not.
MAX_IMAGES = 32
MAX_REQUEST_PIXELS = 200_000_000

# Cove tests width x height against MAX_PIXELS and MAX_SIDE itself, from the header, before any
# pixel is decoded (_open). Pillow's own decompression-bomb test (a warning above 89 megapixels
# through the process's warning filters, an error above 179) is turned off: one test, the same in
# every thread, and the sentence can say how large the image is.
Image.MAX_IMAGE_PIXELS = None

# Pillow's names for the formats Cove takes, and the MIME type each is reported as.
MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
FORMATS = list(MIME)
# The formats whose EXIF orientation is applied (cameras and phones write it there).
_ORIENTED = {"JPEG", "WEBP"}
# What Pillow raises for a file that is damaged or cut short (LOAD_TRUNCATED_IMAGES is left off).
_DAMAGED = (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError, KeyError, struct.error)
# Other formats named when a file is refused, found by Pillow's own test of the first bytes.
_OTHERS = {"BMP": "a BMP", "TIFF": "a TIFF", "ICO": "an ICO icon", "PSD": "a Photoshop file", "JPEG2000": "a JPEG 2000"}
_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1"}


class ImageRefused(ValueError):
    """An image Cove does not take; the message is one sentence that names it."""


@dataclass(frozen=True)
class CheckedImage:
    """An image within the limits, decoded. `rgb` holds width * height * 3 bytes (never printed)."""

    sha256: str  # hex digest of the original bytes
    mime: str  # "image/png", "image/jpeg", "image/webp" or "image/gif", by content
    width: int  # after EXIF orientation
    height: int
    size: int  # the original bytes
    frames: int  # 1, or the frames of an animation (only the first is decoded)
    rgb: bytes = field(repr=False)


def printable(label: str) -> str:
    """`label` with control characters (a newline in a file name) shown as "?"."""
    return "".join(c if c.isprintable() else "?" for c in label)


def amount(size: int) -> str:
    """A byte count for a sentence: "31.2 MB", "20 MB", "640 kB", "12 bytes" (rounded up)."""
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if size >= scale:
            return f"{math.ceil(size * 10 / scale) / 10:g} {unit}"
    return f"{size} byte" if size == 1 else f"{size} bytes"


def too_large(label: str, size: int) -> str:
    """The sentence for an image of `size` bytes, over MAX_BYTES."""
    return f"{printable(label)} is {amount(size)}; an image may be at most {amount(MAX_BYTES)}"


@dataclass
class ImageBudget:
    """What one request's images may take together, counted as they are checked (before each is
    decoded): at most `max_images` images and `max_pixels` pixels. A request of many small files
    that decode to large pictures would otherwise keep the decoder busy for minutes."""

    max_images: int = MAX_IMAGES
    max_pixels: int = MAX_REQUEST_PIXELS
    images: int = 0
    pixels: int = 0

    def take(self, name: str, pixels: int) -> None:
        """Count one more image of `pixels`; ImageRefused when the request would go past a limit."""
        if self.images + 1 > self.max_images:
            raise ImageRefused(f"{name} is one image too many: a request may carry at most {self.max_images} images")
        if self.pixels + pixels > self.max_pixels:
            raise ImageRefused(
                f"{name} would bring the request's images to {(self.pixels + pixels) / 1e6:.0f} megapixels; "
                f"a request's images may have at most {self.max_pixels // 1_000_000} megapixels together"
            )
        self.images += 1
        self.pixels += pixels


def check_image(data: bytes, *, label: str = "the image", budget: ImageBudget | None = None) -> CheckedImage:
    """Check `data` and decode its first frame; ImageRefused (one sentence naming `label`) if it
    is too large, not a PNG, JPEG, WebP or GIF picture, too many pixels, or damaged, or when it
    would take the request past its `budget`."""
    name = printable(label)
    if len(data) > MAX_BYTES:
        raise ImageRefused(too_large(name, len(data)))
    im = _open(data, name)
    if budget is not None:
        try:
            budget.take(name, im.size[0] * im.size[1])
        except ImageRefused:
            im.close()
            raise
    try:
        frames = _frames(im, name)
        rgb_image = _decode(im, name)
        fmt = str(im.format)
    finally:
        im.close()
    return CheckedImage(
        sha256=hashlib.sha256(data).hexdigest(),
        mime=MIME[fmt],
        width=rgb_image.width,
        height=rgb_image.height,
        size=len(data),
        frames=frames,
        rgb=rgb_image.tobytes(),
    )


def check_image_file(path: Path) -> CheckedImage:
    """check_image on the file at `path`, labelled with its name; its size is checked (stat, then
    reading at most MAX_BYTES + 1 bytes) before it is read whole."""
    return read_image_file(path)[1]


def read_image_file(path: Path, *, budget: ImageBudget | None = None) -> tuple[bytes, CheckedImage]:
    """The file's bytes and check_image's picture of them (as check_image_file), counted in `budget`."""
    name = printable(path.name or str(path))
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ImageRefused(f"{name} is not a file")
        if st.st_size > MAX_BYTES:
            raise ImageRefused(too_large(name, st.st_size))
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ImageRefused(f"{name} could not be read: {printable(exc.strerror or str(exc))}") from None
    if len(data) > MAX_BYTES:
        raise ImageRefused(f"{name} is more than {amount(MAX_BYTES)}; an image may be at most {amount(MAX_BYTES)}")
    return data, check_image(data, label=name, budget=budget)


def _open(data: bytes, name: str) -> ImageFile.ImageFile:
    """The image identified by its content and its header read (no pixels decoded), within the
    pixel limits."""
    try:
        im = Image.open(BytesIO(data), formats=FORMATS)
    except Image.UnidentifiedImageError:
        raise ImageRefused(_not_a_picture(data, name)) from None
    except _DAMAGED:
        raise ImageRefused(_damaged(name)) from None
    width, height = im.size
    if width < 1 or height < 1:
        im.close()
        raise ImageRefused(_damaged(name))
    if width * height > MAX_PIXELS:
        im.close()
        raise ImageRefused(f"{name} is {width} × {height} pixels; an image may have at most {_megapixels()}")
    if max(width, height) > MAX_SIDE:
        im.close()
        raise ImageRefused(f"{name} is {width} × {height} pixels; an image may be at most {MAX_SIDE} pixels on a side")
    return im


def _frames(im: ImageFile.ImageFile, name: str) -> int:
    """How many frames `im` has; GIF counts them by walking the blocks, decoding none."""
    try:
        return max(1, int(getattr(im, "n_frames", 1)))
    except _DAMAGED:
        raise ImageRefused(_damaged(name)) from None


def _decode(im: ImageFile.ImageFile, name: str) -> Image.Image:
    """The first frame decoded as RGB: EXIF orientation applied (JPEG, WebP), 16-bit grey scaled to
    8 bits (a tRNS grey level is not kept), transparency composited onto white."""
    try:
        im.seek(0)
        im.load()
        frame: Image.Image = im
        if im.format in _ORIENTED:
            frame = _oriented(im)
        if frame.mode in ("I", "F") or frame.mode.startswith("I;16"):
            frame = frame.convert("I").point(lambda v: v / 256).convert("L")
        if frame.has_transparency_data:
            rgba = frame.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            white.alpha_composite(rgba)
            frame = white
        return frame.convert("RGB")
    except _DAMAGED:
        raise ImageRefused(_damaged(name)) from None


def _oriented(im: Image.Image) -> Image.Image:
    """`im` turned as its EXIF orientation says; unchanged when the EXIF data cannot be read (the
    pixels are good, only the tag is not)."""
    try:
        return ImageOps.exif_transpose(im)
    except _DAMAGED:
        return im


def _megapixels() -> str:
    return f"{MAX_PIXELS / 1_000_000:g} megapixels"


def _damaged(name: str) -> str:
    return f"{name} is damaged or cut short and could not be read"


def _not_a_picture(data: bytes, name: str) -> str:
    """The sentence for bytes none of FORMATS reads: "damaged" when they start as one of them does,
    else "not a picture", with what they are when that is known."""
    head = data[:16]
    for fmt in FORMATS:
        accept = Image.OPEN[fmt][1]
        if accept is not None and accept(head) is True:
            return _damaged(name)
    what = _what_else(data)
    return f"{name} is not a PNG, JPEG, WebP or GIF picture" + (f": it is {what}" if what else "")


def _what_else(data: bytes) -> str | None:
    """A name for some formats Cove does not take, from their first bytes; None for the rest."""
    if data.startswith(b"%PDF-"):
        return "a PDF"
    if data[4:8] == b"ftyp":
        if data[8:12] in (b"avif", b"avis"):
            return "an AVIF"
        if data[8:12] in _HEIF_BRANDS:
            return "a HEIC"
    if b"<svg" in data[:4096].lower():
        return "an SVG drawing"
    Image.init()
    for fmt, what in _OTHERS.items():
        accept = Image.OPEN.get(fmt, (None, None))[1]
        try:
            if accept is not None and accept(data[:16]):
                return what
        except Exception:  # a plugin's test of bytes it was not written for
            continue
    return None
