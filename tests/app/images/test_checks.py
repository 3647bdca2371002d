"""check_image and check_image_file: the four formats decoded to RGB (transparency on white, EXIF
orientation, the first frame of an animation), and every refusal one sentence: too many bytes
(before parsing), not a PNG/JPEG/WebP/GIF by content, too many pixels (before decoding), damaged."""

from __future__ import annotations

import hashlib
import os
import struct
import warnings
import zlib
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageFile

from app.images import checks
from app.images.checks import CheckedImage, ImageRefused, amount, check_image, check_image_file
from tests.app.images.sentences import refused_with


def encode(im: Image.Image, fmt: str, **options: Any) -> bytes:
    out = BytesIO()
    im.save(out, fmt, **options)
    return out.getvalue()


def noise(width: int, height: int) -> Image.Image:
    """Random pixels, so a compressed file is long and cutting it cuts the pixel data."""
    return Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))


def png_claiming(width: int, height: int) -> bytes:
    """A PNG by hand whose IHDR says width x height (8-bit RGB) with a tiny IDAT: a decompression bomb's header."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def refused(call: Callable[[], object]) -> str:
    """The sentence `call` is refused with: an ImageRefused."""
    return refused_with(ImageRefused, call)


def pixel(image: CheckedImage, x: int, y: int) -> tuple[int, int, int]:
    at = (y * image.width + x) * 3
    r, g, b = image.rgb[at : at + 3]
    return (r, g, b)


@pytest.mark.parametrize(("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")])
def test_each_format_is_decoded_to_rgb(fmt: str, mime: str) -> None:
    data = encode(Image.new("RGB", (7, 5), (200, 30, 30)), fmt)
    image = check_image(data)
    assert (image.mime, image.width, image.height, image.frames) == (mime, 7, 5, 1)
    assert image.size == len(data)
    assert image.sha256 == hashlib.sha256(data).hexdigest()
    assert len(image.rgb) == 7 * 5 * 3
    r, g, b = pixel(image, 3, 2)
    assert r > 150 and g < 80 and b < 80


def test_the_format_comes_from_the_content_not_the_name(tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(encode(Image.new("RGB", (4, 4), (0, 0, 255)), "JPEG"))
    assert check_image_file(path).mime == "image/jpeg"


def test_the_repr_never_prints_the_pixels() -> None:
    image = check_image(encode(Image.new("RGB", (50, 50), (1, 2, 3)), "PNG"))
    assert "rgb" not in repr(image) and "\\x01" not in repr(image)
    assert "image/png" in repr(image)


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
def test_transparent_pixels_are_white(fmt: str) -> None:
    im = Image.new("RGBA", (2, 1))
    im.putpixel((0, 0), (0, 0, 0, 0))
    im.putpixel((1, 0), (255, 0, 0, 255))
    image = check_image(encode(im, fmt, lossless=True) if fmt == "WEBP" else encode(im, fmt))
    assert pixel(image, 0, 0) == (255, 255, 255)
    assert pixel(image, 1, 0) == (255, 0, 0)


def test_a_palette_gif_with_a_transparent_index_is_white_there() -> None:
    im = Image.new("P", (2, 1))
    im.putpalette([0, 0, 0, 0, 0, 255])
    im.putpixel((1, 0), 1)
    image = check_image(encode(im, "GIF", transparency=0))
    assert pixel(image, 0, 0) == (255, 255, 255)
    assert pixel(image, 1, 0) == (0, 0, 255)


def test_sixteen_bit_grey_is_scaled_not_clipped() -> None:
    image = check_image(encode(Image.new("I;16", (2, 2), 30000), "PNG"))
    assert pixel(image, 1, 1) == (117, 117, 117)


def test_exif_orientation_6_turns_a_jpeg() -> None:
    im = Image.new("RGB", (40, 20), (255, 0, 0))
    im.paste((0, 0, 255), (20, 0, 40, 20))  # left half red, right half blue
    exif = Image.Exif()
    exif[0x0112] = 6  # the camera was turned: show it turned 90 degrees clockwise
    image = check_image(encode(im, "JPEG", exif=exif, quality=95))
    assert (image.width, image.height) == (20, 40)
    top, bottom = pixel(image, 10, 5), pixel(image, 10, 35)
    assert top[0] > 200 and top[2] < 60  # the left half is now on top
    assert bottom[2] > 200 and bottom[0] < 60


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_an_animation_counts_its_frames_and_gives_the_first(fmt: str) -> None:
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    data = encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, lossless=True)
    image = check_image(data)
    assert image.frames == 3
    assert pixel(image, 4, 4) == (255, 0, 0)


def test_a_decompression_bomb_is_refused_without_being_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[object] = []

    def no_load(self: Image.Image) -> None:
        loads.append(self)
        raise AssertionError("an image over the limits was decoded")

    monkeypatch.setattr(Image.Image, "load", no_load)
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_load)
    assert refused(lambda: check_image(png_claiming(100_000, 100_000), label="bomb.png")) == (
        "bomb.png is 100000 × 100000 pixels; an image may have at most 40 megapixels"
    )
    # Under Pillow's own limits, so it is Cove's test that refuses them.
    assert refused(lambda: check_image(png_claiming(7000, 7000))) == (
        "the image is 7000 × 7000 pixels; an image may have at most 40 megapixels"
    )
    assert refused(lambda: check_image(png_claiming(20_000, 10))) == (
        "the image is 20000 × 10 pixels; an image may be at most 16384 pixels on a side"
    )
    assert loads == []


def test_pillows_decompression_bomb_warning_never_escapes() -> None:
    with warnings.catch_warnings(record=True) as seen:
        message = refused(lambda: check_image(png_claiming(10_000, 10_000)))  # over Pillow's warning threshold
    assert message == "the image is 10000 × 10000 pixels; an image may have at most 40 megapixels"
    assert not [w for w in seen if issubclass(w.category, Image.DecompressionBombWarning)]


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_images_are_refused_as_damaged(fmt: str) -> None:
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False
    data = encode(noise(64, 64), fmt)
    assert check_image(data).width == 64
    message = refused(lambda: check_image(data[: len(data) // 2], label="cut.img"))
    assert message == "cut.img is damaged or cut short and could not be read"


def test_a_png_cut_inside_its_header_is_damaged() -> None:
    png = encode(noise(4, 4), "PNG")
    assert refused(lambda: check_image(png[:20])) == "the image is damaged or cut short and could not be read"


def test_a_text_file_named_like_a_picture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_text("these are words, not pixels\n")
    assert refused(lambda: check_image_file(path)) == "photo.png is not a PNG, JPEG, WebP or GIF picture"


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (encode(Image.new("RGB", (4, 4)), "BMP"), ": it is a BMP"),
        (encode(Image.new("RGB", (4, 4)), "TIFF"), ": it is a TIFF"),
        (b"%PDF-1.7\n%\xe2\xe3\n1 0 obj\n", ": it is a PDF"),
        (b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>', ": it is an SVG drawing"),
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", ": it is a HEIC"),
        (b"", ""),
    ],
)
def test_other_formats_are_refused_and_named(data: bytes, what: str) -> None:
    assert refused(lambda: check_image(data, label="image 2")) == "image 2 is not a PNG, JPEG, WebP or GIF picture" + what


def test_too_many_bytes_are_refused_before_anything_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    data = encode(noise(16, 16), "PNG")
    monkeypatch.setattr(checks, "MAX_BYTES", 100)

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError("an image over the size limit was parsed")

    monkeypatch.setattr(Image, "open", no_open)
    assert refused(lambda: check_image(data)) == f"the image is {amount(len(data))}; an image may be at most 100 bytes"


def test_sizes_read_as_megabytes_rounded_up() -> None:
    assert amount(31_200_000) == "31.2 MB"
    assert amount(20_000_000) == "20 MB"
    assert amount(20_000_001) == "20.1 MB"  # over the limit never reads as the limit
    assert amount(640_000) == "640 kB"
    assert amount(12) == "12 bytes"


def test_a_file_over_the_limit_is_refused_from_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(encode(noise(16, 16), "PNG"))
    monkeypatch.setattr(checks, "MAX_BYTES", 100)

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a file over the size limit was opened")

    monkeypatch.setattr(Path, "open", no_read)
    size = path.stat().st_size
    assert refused(lambda: check_image_file(path)) == f"big.png is {amount(size)}; an image may be at most 100 bytes"


def test_a_missing_or_unusual_file_is_a_sentence(tmp_path: Path) -> None:
    assert refused(lambda: check_image_file(tmp_path / "gone.png")) == "gone.png could not be read: No such file or directory"
    (tmp_path / "folder.png").mkdir()
    assert refused(lambda: check_image_file(tmp_path / "folder.png")) == "folder.png is not a file"


def test_a_label_never_breaks_the_line() -> None:
    assert refused(lambda: check_image(b"text", label="two\nlines.png")) == "two?lines.png is not a PNG, JPEG, WebP or GIF picture"
