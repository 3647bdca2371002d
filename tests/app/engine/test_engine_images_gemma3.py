"""Images through the real engine with a Gemma 3 style projector (tests/support/tiny_vision.py): each
image wrapped in <start_of_image> ... <end_of_image> by libmtmd and decoded with causal attention off,
so a whole image must fit the engine's micro-batch. An image that does not fit is refused with a
sentence before anything is read; one that fits is answered, and reused from the cache."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image as PILImage

from app.engine.client import EngineClient
from app.engine.request import ReplyRequest, Sampling
from app.images.checks import check_image
from app.images.store import ImageStore
from tests.support.tiny_vision import gemma3_image_tokens, write_tiny_gemma3_vision

pytestmark = pytest.mark.timeout(180)


def ask(store: ImageStore, color: tuple[int, int, int]) -> ReplyRequest:
    out = io.BytesIO()
    PILImage.new("RGB", (50, 40), color).save(out, format="PNG")
    data = out.getvalue()
    image = check_image(data)
    part = {"type": "image", "sha256": image.sha256, "mime": image.mime, "width": image.width, "height": image.height}
    return ReplyRequest.chat(
        [{"role": "user", "content": [{"type": "text", "text": "Look: "}, part, {"type": "text", "text": " what is it?"}]}],
        sampling=Sampling(max_tokens=3, temperature=0.0),
        ignore_eos=True,
        conversation_id="g3",
        image_files={image.sha256: str(store.put(data, image.sha256))},
    )


def test_a_gemma3_style_image_is_wrapped_decoded_whole_and_reused(tmp_path: Path) -> None:
    text, mmproj = write_tiny_gemma3_vision(tmp_path / "g3")  # 32 px, 4 px patches, 2 x 2 pooling: 16 tokens
    store = ImageStore(tmp_path / "images")
    with EngineClient() as engine:
        loaded = engine.load(text, n_ctx=512, n_threads=1, mmproj_path=mmproj)
        assert loaded.vision
        first = engine.generate(ask(store, (200, 0, 0))).wait()
        assert first.failure is None, first.error
        assert first.metrics["image_tokens"] == gemma3_image_tokens() == 16
        again = engine.generate(ask(store, (200, 0, 0))).wait()
        assert again.failure is None and again.metrics["image_tokens"] == 0
        assert again.metrics["cached_tokens"] >= again.metrics["prompt_tokens"] - 1


def test_an_image_larger_than_the_micro_batch_is_refused_with_a_sentence(tmp_path: Path) -> None:
    # 64 px in 2 px patches without pooling: 1,024 image tokens, decoded whole; the batch holds 512.
    text, mmproj = write_tiny_gemma3_vision(tmp_path / "big", n_ctx_train=2048, image_size=64, patch_size=2, merge=1)
    store = ImageStore(tmp_path / "images")
    with EngineClient() as engine:
        engine.load(text, n_ctx=2048, n_threads=1, mmproj_path=mmproj)
        refused = engine.generate(ask(store, (0, 0, 200))).wait()
        assert refused.status == "error" and refused.error_kind == "image"
        assert refused.error == (
            "this model's projector makes 1024 tokens of an image and reads them in one batch, but the engine's batch "
            "holds 512, so this model cannot be shown images in Cove"
        )
        after = engine.generate(
            ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=2), ignore_eos=True)
        ).wait()
        assert after.status == "length"  # the engine goes on
