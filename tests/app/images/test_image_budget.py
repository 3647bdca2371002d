"""One request's images counted together (ImageBudget): at most 32 images and 200 megapixels, each
refusal a sentence naming the image that went past, decided from the header before decoding."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from app.images.checks import MAX_IMAGES, ImageBudget, ImageRefused, check_image


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (1, 2, 3)).save(out, "PNG")
    return out.getvalue()


def test_the_image_past_the_count_is_refused_by_name() -> None:
    budget = ImageBudget()
    small = png(4, 4)
    for i in range(MAX_IMAGES):
        check_image(small, label=f"image {i + 1}", budget=budget)
    with pytest.raises(ImageRefused) as refused:
        check_image(small, label="image 33", budget=budget)
    assert str(refused.value) == "image 33 is one image too many: a request may carry at most 32 images"
    assert budget.images == MAX_IMAGES


def test_the_pixels_together_are_bounded_before_decoding() -> None:
    budget = ImageBudget(max_pixels=1_000_000)
    check_image(png(800, 1000), label="first", budget=budget)  # 0.8 megapixels
    with pytest.raises(ImageRefused) as refused:
        check_image(png(500, 500), label="second", budget=budget)
    assert str(refused.value) == (
        "second would bring the request's images to 1 megapixels; a request's images may have at most 1 megapixels together"
    )
    assert budget.pixels == 800_000  # the refused one was not counted


def test_without_a_budget_nothing_is_counted() -> None:
    assert check_image(png(3, 2)).width == 3
