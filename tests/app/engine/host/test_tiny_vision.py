"""The tiny random-weight vision model (tests/support/tiny_vision.py) through libmtmd's low-level API:
the projector loads against the text model, a prompt holding the media marker splits into text and
image chunks, the chunks evaluate into the text model's context (positions = text tokens + image
tokens), images are told apart by their ids and embeddings, and placeholders count tokens without
pixels. The groundwork for image input (issue 51); docs/decisions/tiny-vision-model.md."""

from __future__ import annotations

import ctypes
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
from llama_cpp import mtmd_cpp as mtmd

from app.engine.host.templates import GgufTemplate
from tests.support.tiny_model import N_EMBD
from tests.support.tiny_vision import CHAT_TEMPLATE, IMAGE_SIZE, MEDIA_MARKER, N_IMAGE_TOKENS, write_tiny_vision

pytestmark = pytest.mark.timeout(60)

TEXT, IMAGE = mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT, mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE


@llama_cpp.llama_log_callback
def _quiet(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """libmtmd's own logger (clip's hparams, every encode and decode) says nothing here. Module
    level: ctypes does not keep the callback alive, and a collected one crashes the next log."""


@dataclass
class Vision:
    llm: Llama
    ctx: int  # mtmd_context *
    text: Path
    mmproj: Path


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vision]:
    text, mmproj = write_tiny_vision(tmp_path_factory.mktemp("tiny-vision"))
    mtmd.mtmd_helper_log_set(_quiet, None)  # also sets mtmd_log_set
    llm = Llama(model_path=str(text), n_ctx=256, n_batch=64, n_ubatch=64, n_threads=1, n_threads_batch=1, verbose=False)
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = False
    params.n_threads = 1
    params.print_timings = False
    params.warmup = False
    ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), llm.model, params)
    assert ctx, "libmtmd refused the projector"
    try:
        yield Vision(llm, ctx, text, mmproj)
    finally:
        mtmd.mtmd_free(ctx)  # before the model it was made for
        llm.close()
        mtmd.mtmd_helper_log_set(ctypes.cast(None, llama_cpp.llama_log_callback), None)  # back to the default


def _rgb(seed: int, width: int = IMAGE_SIZE, height: int = IMAGE_SIZE) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, width * height * 3, dtype=np.uint8).tobytes()


def _png(rgb: bytes, width: int, height: int) -> bytes:
    """An 8-bit RGB PNG of `rgb` (stdlib only), as a picked file would arrive."""
    rows = b"".join(b"\x00" + rgb[y * width * 3 : (y + 1) * width * 3] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _bitmap(rgb: bytes | None, width: int = IMAGE_SIZE, height: int = IMAGE_SIZE) -> int:
    """mtmd_bitmap_init copies nx * ny * 3 bytes and takes no length: a shorter buffer is read past
    its end. None makes a placeholder (no pixels), which still counts tokens."""
    if rgb is None:
        bitmap = mtmd.mtmd_bitmap_init(width, height, None)
    else:
        assert len(rgb) == width * height * 3
        bitmap = mtmd.mtmd_bitmap_init(width, height, (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb))
    assert bitmap
    return bitmap


def _tokenize(ctx: int, prompt: str, bitmaps: list[int], *, add_special: bool = True) -> tuple[int, int]:
    """(return code, mtmd_input_chunks *): the caller frees the chunks."""
    raw = prompt.encode()
    text = mtmd.mtmd_input_text(raw, len(raw), add_special, True)  # parse_special: <|im_start|> is one token
    chunks = mtmd.mtmd_input_chunks_init()
    array = (mtmd.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
    return mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), array, len(bitmaps)), chunks


def _chunks(chunks: int) -> list[int]:
    return [mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))]


def _text_tokens(chunk: int) -> list[int]:
    n = ctypes.c_size_t(0)
    tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
    return [tokens[i] for i in range(n.value)]


def _image_chunk(ctx: int, bitmap: int) -> tuple[int, int]:
    """(chunks, its one image chunk) for a prompt that is the marker alone."""
    code, chunks = _tokenize(ctx, MEDIA_MARKER, [bitmap], add_special=False)
    assert code == 0
    (chunk,) = _chunks(chunks)
    assert mtmd.mtmd_input_chunk_get_type(chunk) == IMAGE
    return chunks, chunk


def _embeddings(ctx: int, chunk: int) -> np.ndarray:
    """The image's embeddings, one row per image token, as mtmd_encode_chunk leaves them."""
    assert mtmd.mtmd_encode_chunk(ctx, chunk) == 0
    n_tokens = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
    return np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(ctx), shape=(n_tokens, N_EMBD)).copy()


def test_the_files_are_small_and_the_same_each_time(tmp_path: Path) -> None:
    first = write_tiny_vision(tmp_path / "a")
    second = write_tiny_vision(tmp_path / "b")
    assert [p.name for p in first] == ["text_model.gguf", "mmproj.gguf"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
        assert a.stat().st_size < 2_000_000


def test_the_projector_gives_the_text_model_vision(vision: Vision) -> None:
    assert mtmd.mtmd_get_cap_from_file(str(vision.mmproj).encode()).inp_vision
    assert mtmd.mtmd_support_vision(vision.ctx)
    assert not mtmd.mtmd_support_audio(vision.ctx)
    assert mtmd.mtmd_default_marker() == mtmd.mtmd_get_marker(vision.ctx) == MEDIA_MARKER.encode()
    # The "mlp" projector's image tokens decode causally at ordinary positions, as text does.
    assert not mtmd.mtmd_decode_use_non_causal(vision.ctx, None)
    assert not mtmd.mtmd_decode_use_mrope(vision.ctx)


def test_a_prompt_with_an_image_fills_text_plus_image_positions(vision: Vision) -> None:
    llm, ctx = vision.llm, vision.ctx
    prompt = GgufTemplate(CHAT_TEMPLATE, bos_token="<s>", eos_token="</s>").render(
        [{"role": "user", "content": f"what is in {MEDIA_MARKER} this picture?"}]
    )
    before, after = prompt.split(MEDIA_MARKER)
    bitmap = _bitmap(_rgb(1))
    code, chunks = _tokenize(ctx, prompt, [bitmap])
    mtmd.mtmd_bitmap_free(bitmap)  # the chunks hold the preprocessed image: the bitmap can go now
    try:
        assert code == 0
        pieces = _chunks(chunks)
        assert [mtmd.mtmd_input_chunk_get_type(c) for c in pieces] == [TEXT, IMAGE, TEXT]
        first, image, last = pieces
        # Text chunks are the text model's own tokens of each side of the marker (BOS on the first).
        assert _text_tokens(first) == llm.tokenize(before.encode(), add_bos=True, special=True)
        assert _text_tokens(last) == llm.tokenize(after.encode(), add_bos=False, special=True)
        n_text = len(_text_tokens(first)) + len(_text_tokens(last))
        assert mtmd.mtmd_input_chunk_get_n_tokens(image) == N_IMAGE_TOKENS
        assert mtmd.mtmd_input_chunk_get_n_pos(image) == N_IMAGE_TOKENS
        tokens = mtmd.mtmd_input_chunk_get_tokens_image(image)
        assert tokens and mtmd.mtmd_image_tokens_get_n_tokens(tokens) == N_IMAGE_TOKENS
        assert mtmd.mtmd_helper_get_n_tokens(chunks) == mtmd.mtmd_helper_get_n_pos(chunks) == n_text + N_IMAGE_TOKENS

        memory = llama_cpp.llama_get_memory(llm.ctx)
        llama_cpp.llama_memory_clear(memory, True)
        new_n_past = llama_cpp.llama_pos(0)
        n_batch = llama_cpp.llama_n_batch(llm.ctx)  # the context's batch: a larger one overfills llama_decode
        code = mtmd.mtmd_helper_eval_chunks(ctx, llm.ctx, chunks, 0, 0, n_batch, True, ctypes.byref(new_n_past))
        assert code == 0
        assert new_n_past.value == n_text + N_IMAGE_TOKENS
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == new_n_past.value - 1
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model))
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
        assert np.isfinite(logits).all()  # logits_last: the last text token's row is ready to sample
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


def test_images_are_told_apart_by_id_and_by_embeddings(vision: Vision) -> None:
    """mtmd_helper_bitmap_init_from_buf decodes a file's bytes (PNG, JPEG, ... through stb_image)
    and ids the bitmap with their SHA-256; a bitmap from raw RGB has no id until one is set."""
    ctx = vision.ctx
    width, height = 48, 40  # not the model's size: the fixed-size preprocessor resizes it
    files = [_png(_rgb(seed, width, height), width, height) for seed in (1, 2, 1)]
    seen = []
    for data in files:
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(ctx, (ctypes.c_uint8 * len(data)).from_buffer_copy(data), len(data), False)
        assert bitmap
        assert (mtmd.mtmd_bitmap_get_nx(bitmap), mtmd.mtmd_bitmap_get_ny(bitmap)) == (width, height)
        chunks, chunk = _image_chunk(ctx, bitmap)
        mtmd.mtmd_bitmap_free(bitmap)
        try:
            tokens = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
            assert mtmd.mtmd_input_chunk_get_id(chunk) == mtmd.mtmd_image_tokens_get_id(tokens)
            seen.append((mtmd.mtmd_input_chunk_get_id(chunk), mtmd.mtmd_input_chunk_get_n_tokens(chunk), _embeddings(ctx, chunk)))
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
    (id_a, n_a, embd_a), (id_b, n_b, embd_b), (id_a2, n_a2, embd_a2) = seen
    assert id_a == hashlib.sha256(files[0]).hexdigest().encode()
    assert id_a != id_b and id_a == id_a2
    assert n_a == n_b == n_a2 == N_IMAGE_TOKENS
    assert not np.allclose(embd_a, embd_b)
    assert np.array_equal(embd_a, embd_a2)  # the same image encodes to the same embeddings

    bitmap = _bitmap(_rgb(3))
    assert mtmd.mtmd_bitmap_get_id(bitmap) == b""
    mtmd.mtmd_bitmap_set_id(bitmap, b"picked-image-7")
    chunks, chunk = _image_chunk(ctx, bitmap)
    mtmd.mtmd_bitmap_free(bitmap)
    try:
        assert mtmd.mtmd_input_chunk_get_id(chunk) == b"picked-image-7"
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


def test_a_placeholder_counts_the_image_tokens_without_pixels(vision: Vision) -> None:
    placeholder = _bitmap(None)
    assert mtmd.mtmd_bitmap_get_n_bytes(placeholder) == 0
    chunks, chunk = _image_chunk(vision.ctx, placeholder)
    mtmd.mtmd_bitmap_free(placeholder)
    try:
        assert mtmd.mtmd_input_chunk_get_n_tokens(chunk) == N_IMAGE_TOKENS
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


@pytest.mark.parametrize(("prompt", "n_bitmaps"), [("no marker", 1), (f"{MEDIA_MARKER} and {MEDIA_MARKER}", 1), (MEDIA_MARKER, 2)])
def test_markers_and_bitmaps_that_do_not_pair_are_refused(vision: Vision, prompt: str, n_bitmaps: int) -> None:
    bitmaps = [_bitmap(_rgb(i)) for i in range(n_bitmaps)]
    code, chunks = _tokenize(vision.ctx, prompt, bitmaps)
    try:
        assert code != 0  # mtmd.h says 1; the pinned build answers 2 (its tokenizer throws)
        assert mtmd.mtmd_input_chunks_size(chunks) == 0
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        for bitmap in bitmaps:
            mtmd.mtmd_bitmap_free(bitmap)


def test_parts_keep_a_marker_in_the_text_as_text(vision: Vision) -> None:
    """mtmd_tokenize_from_parts places each image between text parts and substitutes no markers: a
    person's own "<__media__>" stays text instead of claiming an image."""
    ctx = vision.ctx
    before = mtmd.mtmd_input_text(f"look {MEDIA_MARKER} ".encode(), len(f"look {MEDIA_MARKER} "), False, True)
    after = mtmd.mtmd_input_text(b" here", 5, False, True)
    bitmap = _bitmap(_rgb(4))
    parts = [
        mtmd.mtmd_input_part(ctypes.pointer(before), None),
        mtmd.mtmd_input_part(None, bitmap),
        mtmd.mtmd_input_part(ctypes.pointer(after), None),
    ]
    array = (ctypes.POINTER(mtmd.mtmd_input_part) * len(parts))(*[ctypes.pointer(p) for p in parts])
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        assert mtmd.mtmd_tokenize_from_parts(ctx, chunks, array, len(parts), True) == 0
        first, image, last = _chunks(chunks)
        assert [mtmd.mtmd_input_chunk_get_type(c) for c in (first, image, last)] == [TEXT, IMAGE, TEXT]
        assert _text_tokens(first) == vision.llm.tokenize(f"look {MEDIA_MARKER} ".encode(), add_bos=True, special=True)
        assert mtmd.mtmd_input_chunk_get_n_tokens(image) == N_IMAGE_TOKENS
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
