"""An image part of an API request, read the same way for the three chat endpoints: its data (a
data: URI, or base64 with a media type: app/images/data_uri.py) checked and its first frame decoded
(app/images/checks.py), and kept in the message as ImagePart's dict (app/engine/request.py): the
file's SHA-256, its type and its size in pixels, never its bytes. The file's bytes go to this
process's passing images (app/images/store.py), where the engine reads them while the reply runs.

Anything refused (a link, which is never fetched; bad base64; a damaged, oversized or other
picture; a file id, as Cove has no file store) is an ApiError 400 with one sentence naming where
the image is (`where`: "messages[0].content[1]", in the API's own way of writing a field) and the
field the error names (`param`).

app/images imports Pillow; it is imported here only when a request has an image."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from app.engine.request import ImagePart
from app.serve.http.errors import ApiError

T = TypeVar("T")
_BUDGET: ContextVar[Any] = ContextVar("image_budget", default=None)  # the request's ImageBudget, while it is read


def image_from_url(url: object, *, where: str, param: str) -> dict[str, Any]:
    """The ImagePart dict of an image given as a URL (OpenAI's `image_url`, Responses'
    `input_image`), which must be a base64 data: URI."""
    from app.images.data_uri import ImageSourceRefused, image_bytes_from_url

    if not isinstance(url, str):
        raise ApiError(400, f"{where}: the image's URL must be a string (a base64 data: URI)", param=param)
    try:
        data, _declared = image_bytes_from_url(url, label=where)
    except ImageSourceRefused as exc:
        raise ApiError(400, str(exc), param=param) from None
    return _checked(data, where, param)


def image_from_base64(data: object, media_type: object, *, where: str, param: str) -> dict[str, Any]:
    """The ImagePart dict of an image given as base64 with its media type (an Anthropic `source`
    of type "base64")."""
    from app.images.data_uri import ImageSourceRefused, image_bytes_from_base64

    if not isinstance(data, str):
        raise ApiError(400, f"{where}.source.data: must be a string of base64", param=param)
    if media_type is not None and not isinstance(media_type, str):
        raise ApiError(400, f"{where}.source.media_type: must be a string such as image/png", param=param)
    try:
        raw = image_bytes_from_base64(data, media_type, label=where)
    except ImageSourceRefused as exc:
        raise ApiError(400, str(exc), param=param) from None
    return _checked(raw, where, param)


def no_file_store(where: str, param: str, *, send: str = "as a base64 data: URI") -> ApiError:
    """The refusal of an image named by a file id (Responses' `file_id`, an Anthropic `file`
    source); `send`: how the API gives an image inline instead."""
    return ApiError(400, f"{where} names an uploaded file, but Cove has no file store; send the image itself, {send}", param=param)


def with_image_budget(reader: Callable[[Any], T], body: Any) -> T:
    """`reader(body)` with a fresh ImageBudget for the images it reads (app/images/checks.py):
    one request's images are counted together. Runs in the reader's worker thread."""
    from app.images.checks import ImageBudget

    token = _BUDGET.set(ImageBudget())
    try:
        return reader(body)
    finally:
        _BUDGET.reset(token)


def _checked(data: bytes, where: str, param: str) -> dict[str, Any]:
    from app.images.checks import ImageRefused, check_image

    try:
        image = check_image(data, label=where, budget=_BUDGET.get())
    except ImageRefused as exc:
        raise ApiError(400, str(exc), param=param) from None
    from app.images.store import passing_images

    passing_images().put(data, image.sha256)  # for the engine to read (Job.request's image_files)
    return ImagePart(image.sha256, image.mime, image.width, image.height).to_dict()
