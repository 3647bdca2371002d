"""Real pictures for the history's image tests: PNG and JPEG bytes made with Pillow, checked as
every front end checks them (app/images/checks.py) and kept in an images folder as the front ends
keep them (ImageStore.put before add_user_message)."""

from __future__ import annotations

import io

from PIL import Image

from app.images.checks import CheckedImage, check_image
from app.images.store import ImageStore


def picture(colour: tuple[int, int, int], size: tuple[int, int] = (8, 6), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, fmt)
    return out.getvalue()


def keep(store: ImageStore, data: bytes) -> CheckedImage:
    """Check `data` and put it in `store`, as a front end does before saving the message."""
    image = check_image(data, label="test.png")
    store.put(data, image.sha256)
    return image
