"""The terminal's figures line names a reply's images: how many, their tokens and the encoding time,
or that the engine's cache held them."""

from __future__ import annotations

from app.cli.output import image_figures, metrics_line


def test_the_figures_line_names_the_images_and_their_encoding() -> None:
    line = metrics_line("m", "complete", {"prompt_tokens": 49, "cached_tokens": 0, "images": 2, "image_tokens": 32, "image_encode_ms": 3.6})
    assert line == "m · complete · prompt 49 tok (0 cached) · 2 images (32 tok, encoded in 3.6 ms)"
    assert image_figures({"images": 1, "image_tokens": 0, "image_encode_ms": 0.0}) == "1 image (reused)"
    assert image_figures({"prompt_tokens": 3}) is None
    assert image_figures({"images": 1, "image_tokens": 256, "image_encode_ms": 1843.6}) == "1 image (256 tok, encoded in 1844 ms)"
