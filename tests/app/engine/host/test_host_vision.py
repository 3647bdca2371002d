"""The host's image encoder (app/engine/host/vision.py) on the tiny random-weight vision model
(tests/support/tiny_vision.py): a projector opens against the text model, prompts of text and images
split into pieces whose identity tells images apart, evaluate into the context, and refusals (an
unreadable image, a file that is not a projector or does not fit the model) are one sentence each."""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from llama_cpp import Llama

from app.engine.host.vision import Image, ImagePiece, Projector, TextPiece, VisionError, identity
from app.images.checks import check_image
from tests.support.tiny_model import N_EMBD
from tests.support.tiny_vision import IMAGE_SIZE, MEDIA_MARKER, N_IMAGE_TOKENS, write_tiny_mmproj, write_tiny_vision

pytestmark = pytest.mark.timeout(60)


@dataclass
class Tiny:
    llm: Llama
    projector: Projector
    text: Path
    mmproj: Path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiny]:
    text, mmproj = write_tiny_vision(tmp_path_factory.mktemp("tiny-vision"))
    llm = Llama(model_path=str(text), n_ctx=256, n_batch=64, n_ubatch=64, n_threads=1, n_threads_batch=1, verbose=False)
    projector = Projector.open(llm.model, str(mmproj), n_threads=1, use_gpu=False)
    try:
        yield Tiny(llm, projector, text, mmproj)
    finally:
        projector.close()  # before the model it was made for
        llm.close()


def _png(seed: int, width: int = IMAGE_SIZE, height: int = IMAGE_SIZE) -> bytes:
    """An 8-bit RGB PNG of random pixels (stdlib only), as a picked file would arrive."""
    rgb = np.random.default_rng(seed).integers(0, 256, width * height * 3, dtype=np.uint8).tobytes()
    rows = b"".join(b"\x00" + rgb[y * width * 3 : (y + 1) * width * 3] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _image(seed: int) -> Image:
    """A picked PNG as Cove hands it to the host: checked and decoded by app/images/checks.py."""
    checked = check_image(_png(seed))
    return Image(checked.width, checked.height, checked.rgb, checked.sha256)


def _pieces(projector: Projector, parts: list[str | Image]) -> list[TextPiece | ImagePiece]:
    with projector.tokenize(parts) as prompt:
        return prompt.pieces


def test_the_projector_gives_the_model_vision(tiny: Tiny) -> None:
    p = tiny.projector
    assert p.vision and not p.audio
    assert p.marker == MEDIA_MARKER
    assert not p.non_causal and not p.mrope  # the "mlp" projector decodes images causally at ordinary positions


def test_text_image_text_splits_into_pieces_and_evaluates(tiny: Tiny, capfd: pytest.CaptureFixture[str]) -> None:
    png = _png(1, 48, 40)  # not the model's size: the preprocessor resizes it
    checked = check_image(png)
    picture = Image(checked.width, checked.height, checked.rgb, checked.sha256)
    with tiny.projector.tokenize(["<|im_start|>user\nwhat is in ", picture, " this picture?<|im_end|>\n"]) as prompt:
        first, image, last = prompt.pieces
        assert isinstance(first, TextPiece) and isinstance(last, TextPiece)
        assert first.tokens == tuple(tiny.llm.tokenize(b"<|im_start|>user\nwhat is in ", add_bos=True, special=True))
        assert last.tokens == tuple(tiny.llm.tokenize(b" this picture?<|im_end|>\n", add_bos=False, special=True))
        assert image == ImagePiece(hashlib.sha256(png).hexdigest(), N_IMAGE_TOKENS, N_IMAGE_TOKENS)
        n_text = len(first.tokens) + len(last.tokens)
        assert prompt.n_tokens == prompt.n_pos == n_text + N_IMAGE_TOKENS

        memory = llama_cpp.llama_get_memory(tiny.llm.ctx)
        llama_cpp.llama_memory_clear(memory, True)
        capfd.readouterr()
        n_batch = llama_cpp.llama_n_batch(tiny.llm.ctx)
        n_past = prompt.eval(tiny.llm.ctx, n_past=0, seq_id=0, n_batch=n_batch)
        assert n_past == prompt.n_pos
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == n_past - 1
        # libmtmd logs every encode and decode; routed to llama-cpp-python's logger, a quiet model prints none of it.
        assert capfd.readouterr().err == ""

        # Evaluated again after it, the positions carry on from where it ended.
        assert prompt.eval(tiny.llm.ctx, n_past=n_past, seq_id=0, n_batch=n_batch) == 2 * n_past


def test_a_marker_typed_in_the_text_stays_text(tiny: Tiny) -> None:
    pieces = _pieces(tiny.projector, [f"look {MEDIA_MARKER} here"])
    assert len(pieces) == 1 and isinstance(pieces[0], TextPiece)
    assert pieces[0].tokens == tuple(tiny.llm.tokenize(f"look {MEDIA_MARKER} here".encode(), add_bos=True, special=True))


def test_identity_tells_images_and_their_order_apart(tiny: Tiny) -> None:
    a, b = _image(1), _image(2)

    def key(*images: Image) -> tuple[object, ...]:
        parts: list[str | Image] = ["compare "]
        for image in images:
            parts += [image, " and "]
        return identity(_pieces(tiny.projector, parts))

    assert key(a) == key(_image(1))  # the same bytes, another object
    assert key(a) != key(b)
    assert key(a, b) != key(b, a)
    assert key(a, b) == key(a, b)
    text_only = identity(_pieces(tiny.projector, ["compare  and "]))
    assert key(a) != text_only
    hash(key(a, b))


@pytest.mark.parametrize(
    ("width", "height", "rgb", "sha256", "said"),
    [
        (IMAGE_SIZE, IMAGE_SIZE, b"\x00" * 30, "a" * 64, f"{IMAGE_SIZE} x {IMAGE_SIZE} pixels, 30 bytes of RGB"),  # short: never read past
        (0, 0, b"", "a" * 64, "0 x 0 pixels, 0 bytes of RGB"),
        (1, 1, b"\x00\x00\x00", "not a hash", "1 x 1 pixels, 3 bytes of RGB"),
    ],
)
def test_pixels_that_do_not_make_the_picture_are_refused_and_the_projector_still_works(
    tiny: Tiny, width: int, height: int, rgb: bytes, sha256: str, said: str
) -> None:
    with pytest.raises(VisionError) as refused:
        tiny.projector.tokenize(["first ", _image(3), " then ", Image(width, height, rgb, sha256)])
    assert str(refused.value) == f"image 2 is not a decoded picture ({said})"
    pieces = _pieces(tiny.projector, ["again ", _image(3)])
    assert [type(p) for p in pieces] == [TextPiece, ImagePiece]


def test_a_part_that_is_neither_text_nor_an_image_is_refused(tiny: Tiny) -> None:
    with pytest.raises(VisionError, match="^a prompt part is text or an image, not bytes$"):
        tiny.projector.tokenize(["look ", b"raw"])  # type: ignore[list-item]


def _refusal(tiny: Tiny, path: Path) -> str:
    with pytest.raises(VisionError) as refused:
        Projector.open(tiny.llm.model, str(path), n_threads=1, use_gpu=False)
    return str(refused.value)


def test_a_missing_file_is_refused(tiny: Tiny, tmp_path: Path) -> None:
    assert _refusal(tiny, tmp_path / "nowhere.gguf") == f"the projector file {tmp_path / 'nowhere.gguf'} does not exist"


def test_a_file_that_is_not_a_gguf_is_refused(tiny: Tiny, tmp_path: Path) -> None:
    (tmp_path / "notes.gguf").write_text("just some text")
    message = _refusal(tiny, tmp_path / "notes.gguf")
    assert message.startswith("notes.gguf is not a projector libmtmd reads (not a GGUF model file")


def test_a_text_model_is_not_a_projector(tiny: Tiny) -> None:
    message = _refusal(tiny, tiny.text)
    assert message == "text_model.gguf is not a projector libmtmd reads: it holds a llama model, not a clip projector"


def test_a_projector_for_another_width_does_not_fit(tiny: Tiny, tmp_path: Path) -> None:
    other = write_tiny_mmproj(tmp_path / "wide.gguf", n_embd_text=2 * N_EMBD)
    message = _refusal(tiny, other)
    assert (
        message
        == f"the projector wide.gguf does not fit this model: it gives embeddings of width {2 * N_EMBD} and the model takes {N_EMBD}"
    )


def test_close_is_idempotent_and_a_closed_projector_says_so(tiny: Tiny) -> None:
    projector = Projector.open(tiny.llm.model, str(tiny.mmproj), n_threads=1, use_gpu=False)
    with projector:
        prompt = projector.tokenize(["hello ", _image(5)])
        prompt.close()
        prompt.close()
        with pytest.raises(VisionError, match="^the prompt is closed$"):
            prompt.eval(tiny.llm.ctx, n_past=0, seq_id=0, n_batch=64)
        kept = projector.tokenize(["hello"])
    projector.close()
    with pytest.raises(VisionError, match="^the projector is closed$"):
        projector.tokenize(["hello"])
    with pytest.raises(VisionError, match="^the projector is closed$"):
        kept.eval(tiny.llm.ctx, n_past=0, seq_id=0, n_batch=64)
    kept.close()
    kept.close()
