"""`cove chat --image FILE`: each file checked (app/images/checks.py: its size, its type by content,
its pixels) before anything is read or written, the model asked whether it can see images, and the
files kept in the history's images folder for the message that carries them.

app/images imports Pillow: this module is imported only when a run has images."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.engine.request import cannot_see_images, sees_images
from app.images.checks import CheckedImage, ImageBudget, ImageRefused, read_image_file
from app.images.store import ImageStore
from app.remote.remote_model import RemoteModel
from models.library import InstalledModel


class ImagesRefused(ValueError):
    """The run's images cannot be sent; str(exc) is the sentence."""


def read_images(paths: Sequence[str]) -> list[tuple[bytes, CheckedImage]]:
    """Each file's bytes and its checked picture, in order; ImagesRefused names the first file
    that cannot be read or that the checks refuse."""
    budget = ImageBudget()
    try:
        return [read_image_file(Path(path), budget=budget) for path in paths]
    except ImageRefused as exc:
        raise ImagesRefused(str(exc)) from None


def refuse_unseeing(model: InstalledModel | RemoteModel) -> None:
    """ImagesRefused when `model` cannot see images."""
    if not sees_images(model):
        raise ImagesRefused(cannot_see_images(model.name))


def keep_images(store: ImageStore, images: Sequence[tuple[bytes, CheckedImage]]) -> list[CheckedImage]:
    """The images' files put in `store` (the history's images folder), and the images as the
    message keeps them."""
    for data, checked in images:
        store.put(data, checked.sha256)
    return [checked for _, checked in images]
