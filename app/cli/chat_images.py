"""`cove chat --image FILE`: each file checked (app/images/checks.py: its size, its type by content,
its pixels) before anything is read or written, then the model asked whether it can see images.
No model can yet (app/engine/request.py sees_images), and a turn carries no images, so a run
with images ends here with a sentence: the first file the checks refuse, or the model's.

app/images imports Pillow: this module is imported only when a run has images."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from app.engine.request import cannot_see_images
from app.images.checks import ImageRefused, check_image_file
from app.remote.remote_model import RemoteModel
from models.library import InstalledModel


def image_refusal(paths: Sequence[str], resolve: Callable[[], InstalledModel | RemoteModel]) -> str:
    """The sentence that refuses this run's images: the first of `paths` the checks refuse, else
    that the model (`resolve`, called once the files passed) cannot see them."""
    for path in paths:
        try:
            check_image_file(Path(path))
        except ImageRefused as exc:
            return str(exc)
    return cannot_see_images(resolve().name)
