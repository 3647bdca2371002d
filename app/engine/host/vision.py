"""The engine host's image encoder: a vision projector ("mmproj") opened with llama.cpp's multimodal
library (libmtmd) against the loaded text model, prompts of text and images tokenized into chunks,
and those chunks evaluated into the text model's context; each image can also be kept alone
(`ImageChunk`) and read into a sequence when a reply reaches its place (app/engine/host/image_prompt.py).

Owns the mtmd context (`Projector`) and the tokenized prompts (`PromptChunks`), and the key of a
prompt for prefix caching (`identity`): its text tokens with each image's SHA-256 in its place.
docs/decisions/tiny-vision-model.md records what the low-level API does.

- Prompts are built with mtmd_tokenize_from_parts: a media marker that a person typed stays text and
  never claims an image.
- Images arrive decoded: RGB pixels from app/images/checks.py (Pillow, every limit checked before
  decoding), handed to mtmd_bitmap_init with their SHA-256 (of the file's bytes) as the chunk's id.
  libmtmd's own decoder (stb_image, with an audio decoder and an ffmpeg fallback behind it) is
  never given a file.
- libmtmd's log goes where llama.cpp's goes in the host: llama-cpp-python's logger, quiet unless a
  model was opened verbose. Its error lines while a projector opens explain a refusal
  (mtmd_init_from_file only returns NULL).

Runs only in the host process (it imports llama_cpp). Not thread-safe: one thread uses a projector
and its prompts. Close every projector before the text model it was opened for.
"""

from __future__ import annotations

import ctypes
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import llama_cpp
from llama_cpp import _logger

try:  # a build of llama.cpp without its multimodal library still runs text models
    from llama_cpp import mtmd_cpp as mtmd
except (OSError, RuntimeError, FileNotFoundError) as exc:  # load_shared_library's refusals
    mtmd = None  # type: ignore[assignment]
    _NO_MTMD = f"this build of llama.cpp has no multimodal library (libmtmd: {exc}), so no projector can be opened"

from models.gguf_validate import InvalidModelFile, read_gguf_header

_GGML_LOG_LEVEL_ERROR = 4  # enum ggml_log_level
_MISMATCH = re.compile(r"text model \(n_embd = (\d+)\) and mmproj \(n_embd = (\d+)\)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class VisionError(Exception):
    """A projector could not be opened, or a prompt with images built or evaluated; the message is
    one readable sentence."""


@dataclass(frozen=True, repr=False)
class Image:
    """A decoded picture: `rgb` holds width * height * 3 bytes (app/images/checks.CheckedImage gives
    them); `sha256` is the hex SHA-256 of the file it was decoded from, the chunk's id in libmtmd
    and the image's identity in a prompt's key."""

    width: int
    height: int
    rgb: bytes
    sha256: str

    def __repr__(self) -> str:
        return f"Image({self.width} x {self.height}, sha256 {self.sha256[:12]})"

    @classmethod
    def placeholder(cls, width: int, height: int, sha256: str) -> Image:
        """An image of this size without its pixels: libmtmd counts its tokens and positions
        without preprocessing anything, and its chunk must never be evaluated."""
        return cls(width, height, b"", sha256)


@dataclass(frozen=True)
class TextPiece:
    """A text chunk of a prompt: the text model's tokens."""

    tokens: tuple[int, ...]


@dataclass(frozen=True)
class ImagePiece:
    """An image chunk of a prompt: the image's SHA-256, its embedding tokens, and the positions
    they take (fewer than the tokens under M-RoPE)."""

    sha256: str
    n_tokens: int
    n_pos: int


Piece = TextPiece | ImagePiece


def identity(pieces: Sequence[Piece]) -> tuple[int | tuple[str, str, int], ...]:
    """A hashable key of a prompt for prefix caching: each text token as itself and each image as
    ("image", sha256, n_pos), in order; two prompts with the same text and different images, or the
    same images in another order, differ."""
    key: list[int | tuple[str, str, int]] = []
    for piece in pieces:
        if isinstance(piece, TextPiece):
            key.extend(piece.tokens)
        else:
            key.append(("image", piece.sha256, piece.n_pos))
    return tuple(key)


@contextmanager
def _log_errors() -> Iterator[list[str]]:
    """libmtmd's error lines while the block runs, every line still passed on to llama-cpp-python's
    logger; afterwards libmtmd logs through that logger alone. The callback lives as long as the
    block, which is as long as libmtmd holds it."""
    errors: list[str] = []

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def collect(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level == _GGML_LOG_LEVEL_ERROR:
            errors.append(text.decode("utf-8", "replace"))
        _logger.llama_log_callback(level, text, user_data)

    mtmd.mtmd_helper_log_set(collect, None)  # also sets mtmd_log_set
    try:
        yield errors
    finally:
        mtmd.mtmd_helper_log_set(_logger.llama_log_callback, None)  # a module global: it stays alive


class Projector:
    """An mtmd context: a projector opened against one loaded text model."""

    def __init__(self, ctx: Any, name: str) -> None:
        self._ctx: Any = ctx  # mtmd_context *, None once closed
        self.name = name
        self.vision = bool(mtmd.mtmd_support_vision(ctx))
        self.audio = bool(mtmd.mtmd_support_audio(ctx))
        marker = mtmd.mtmd_get_marker(ctx) or mtmd.mtmd_default_marker()
        self.marker = marker.decode("utf-8", "replace")
        self.non_causal = bool(mtmd.mtmd_decode_use_non_causal(ctx, None))  # images decode with causal attention off
        self.mrope = bool(mtmd.mtmd_decode_use_mrope(ctx))  # image positions are M-RoPE's: n_pos < n_tokens

    @classmethod
    def open(cls, model: Any, mmproj_path: str, *, n_threads: int, use_gpu: bool) -> Projector:
        """Open the projector at `mmproj_path` for `model` (a llama_model pointer, as `Llama.model`
        gives). The file is checked as a GGUF before libmtmd reads it; VisionError says why a file
        is refused."""
        if mtmd is None:
            raise VisionError(_NO_MTMD)
        if not model:
            raise VisionError("the projector cannot be opened: no text model is loaded")
        if n_threads < 1:
            raise VisionError(f"the projector needs at least one thread, not {n_threads}")
        path = Path(mmproj_path)
        if not path.is_file():
            raise VisionError(f"the projector file {path} does not exist")
        try:
            header = read_gguf_header(path)
        except InvalidModelFile as exc:
            raise VisionError(f"{path.name} is not a projector libmtmd reads ({exc})") from None
        arch = header.metadata.get("general.architecture")
        if arch != "clip":
            raise VisionError(f"{path.name} is not a projector libmtmd reads: it holds a {arch} model, not a clip projector")
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = n_threads
        params.print_timings = False
        with _log_errors() as errors:
            ctx = mtmd.mtmd_init_from_file(str(path).encode(), model, params)
        if not ctx:
            logged = " ".join("".join(errors).split())
            mismatch = _MISMATCH.search(logged)
            if mismatch:
                n_text, n_proj = mismatch.groups()
                raise VisionError(
                    f"the projector {path.name} does not fit this model: it gives embeddings of width {n_proj} and the model takes {n_text}"
                )
            raise VisionError(f"libmtmd could not open the projector {path.name}" + (f" ({logged})" if logged else ""))
        return cls(ctx, path.name)

    def tokenize(self, parts: Sequence[str | Image], *, add_special: bool = True) -> PromptChunks:
        """The prompt made of `parts` in order: text (special tokens such as <|im_start|> parsed; a
        media marker stays text) and images (their pixels copied into the chunks).
        `add_special` adds the model's BOS as its text tokenizer would."""
        ctx = self._live()
        bitmaps: list[int] = []
        chunks = None
        try:
            keep: list[Any] = []  # the texts and structs the parts point to, alive until libmtmd has read them
            pointers = []
            n_image = 0
            for part in parts:
                if isinstance(part, Image):
                    n_image += 1
                    bitmaps.append(self._bitmap(ctx, part, n_image))
                    entry = mtmd.mtmd_input_part(None, bitmaps[-1])
                elif isinstance(part, str):
                    raw = part.encode("utf-8")
                    text = mtmd.mtmd_input_text(raw, len(raw), False, True)  # parse_special: the template's tokens
                    keep += [raw, text]
                    entry = mtmd.mtmd_input_part(ctypes.pointer(text), None)
                else:
                    raise VisionError(f"a prompt part is text or an image, not {type(part).__name__}")
                keep.append(entry)
                pointers.append(ctypes.pointer(entry))
            array = (ctypes.POINTER(mtmd.mtmd_input_part) * len(pointers))(*pointers)
            chunks = mtmd.mtmd_input_chunks_init()
            if not chunks:
                raise VisionError("libmtmd could not make room for the prompt")
            code = mtmd.mtmd_tokenize_from_parts(ctx, chunks, array, len(pointers), add_special)
            if code != 0:
                raise VisionError(f"libmtmd could not build the prompt from its text and images (code {code})")
            prompt = PromptChunks(self, chunks)
            chunks = None  # the prompt owns them now
            return prompt
        finally:
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)
            for bitmap in bitmaps:  # the chunks hold the preprocessed images
                mtmd.mtmd_bitmap_free(bitmap)

    @staticmethod
    def _bitmap(ctx: Any, image: Image, n: int) -> int:
        """The bitmap of the `n`th image (from 1), its id the image's SHA-256. mtmd_bitmap_init
        reads width * height * 3 bytes and takes no length, so the length is checked here."""
        w, h, rgb = image.width, image.height, image.rgb
        if w < 1 or h < 1 or len(rgb) not in (0, w * h * 3) or not _SHA256.fullmatch(image.sha256):
            raise VisionError(f"image {n} is not a decoded picture ({w} x {h} pixels, {len(rgb)} bytes of RGB)")
        pixels = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb) if rgb else None  # None: a placeholder
        bitmap = mtmd.mtmd_bitmap_init(w, h, pixels)
        if not bitmap:
            raise VisionError(f"libmtmd could not take image {n}")
        mtmd.mtmd_bitmap_set_id(bitmap, image.sha256.encode())
        return int(bitmap)

    def _live(self) -> Any:
        if not self._ctx:
            raise VisionError("the projector is closed")
        return self._ctx

    def close(self) -> None:
        """Free the mtmd context; closing again does nothing."""
        ctx, self._ctx = self._ctx, None
        if ctx:
            mtmd.mtmd_free(ctx)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class PromptChunks:
    """A tokenized prompt (mtmd_input_chunks), owned here, with what the caller needs to compare
    and place it: `pieces`, `n_tokens` and `n_pos` (the positions it takes in the context)."""

    def __init__(self, projector: Projector, chunks: Any) -> None:
        self._projector = projector
        self._chunks: Any = chunks  # mtmd_input_chunks *, None once closed
        self.n_tokens = int(mtmd.mtmd_helper_get_n_tokens(chunks))
        self.n_pos = int(mtmd.mtmd_helper_get_n_pos(chunks))
        self.pieces: list[Piece] = [_piece(mtmd.mtmd_input_chunks_get(chunks, i)) for i in range(mtmd.mtmd_input_chunks_size(chunks))]

    def eval(self, llama_ctx: Any, *, n_past: int, seq_id: int, n_batch: int, logits_last: bool = True) -> int:
        """Decode the prompt into `llama_ctx` (the text model's llama_context) from position `n_past`
        in sequence `seq_id`, images encoded on the way, in batches of `n_batch` (the context's
        llama_n_batch); the new n_past. With `logits_last` the last token's logits are ready to sample."""
        if not self._chunks:
            raise VisionError("the prompt is closed")
        ctx = self._projector._live()
        new_n_past = llama_cpp.llama_pos(0)
        code = mtmd.mtmd_helper_eval_chunks(ctx, llama_ctx, self._chunks, n_past, seq_id, n_batch, logits_last, ctypes.byref(new_n_past))
        if code != 0:
            raise VisionError(f"the prompt with its images could not be evaluated (libmtmd returned {code})")
        return int(new_n_past.value)

    def close(self) -> None:
        """Free the chunks; closing again does nothing."""
        chunks, self._chunks = self._chunks, None
        if chunks:
            mtmd.mtmd_input_chunks_free(chunks)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _piece(chunk: Any) -> Piece:
    kind = mtmd.mtmd_input_chunk_get_type(chunk)
    if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
        n = ctypes.c_size_t(0)
        tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
        return TextPiece(tuple(tokens[i] for i in range(n.value)) if tokens else ())
    if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
        chunk_id = mtmd.mtmd_input_chunk_get_id(chunk) or b""
        return ImagePiece(
            chunk_id.decode("ascii", "replace"), int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)), int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        )
    raise VisionError(f"libmtmd made a prompt chunk of a kind Cove does not handle ({kind})")


class ImageChunk:
    """One image of a tokenized prompt, copied out of it (mtmd_input_chunk_copy) so that it outlives
    the prompt: its preprocessed pixels, ready to encode and decode into a sequence whenever the
    reply reaches its place."""

    def __init__(self, projector: Projector, chunk: Any) -> None:
        self._projector = projector
        self._chunk: Any = chunk  # an owned mtmd_input_chunk *, None once closed
        piece = _piece(chunk)
        assert isinstance(piece, ImagePiece)
        self.sha256, self.n_tokens, self.n_pos = piece.sha256, piece.n_tokens, piece.n_pos

    def eval(self, llama_ctx: Any, *, n_past: int, seq_id: int, n_batch: int) -> tuple[int, float]:
        """Encode the image (the projector's work) and decode its embeddings into sequence `seq_id`
        of `llama_ctx` from position `n_past`, in batches of `n_batch`; the new n_past and the
        encoding's milliseconds. No logits are kept: a prompt never ends with an image."""
        if not self._chunk:
            raise VisionError("the image is closed")
        ctx = self._projector._live()
        t0 = time.perf_counter()
        if mtmd.mtmd_encode_chunk(ctx, self._chunk) != 0:
            raise VisionError(f"the projector could not encode the image {self.sha256[:12]}…")
        encode_ms = (time.perf_counter() - t0) * 1000.0
        embd = mtmd.mtmd_get_output_embd(ctx)
        new_n_past = llama_cpp.llama_pos(0)
        code = mtmd.mtmd_helper_decode_image_chunk(
            ctx, llama_ctx, self._chunk, embd, n_past, seq_id, n_batch, ctypes.byref(new_n_past), _NO_CALLBACK, None
        )
        if code != 0:
            raise VisionError(f"the image {self.sha256[:12]}… could not be read into the context (libmtmd returned {code})")
        return int(new_n_past.value), encode_ms

    def close(self) -> None:
        chunk, self._chunk = self._chunk, None
        if chunk:
            mtmd.mtmd_input_chunk_free(chunk)


def image_chunks(prompt: PromptChunks) -> list[ImageChunk]:
    """Copies of the image chunks of `prompt`, in order (each owned by the caller: close it)."""
    chunks = prompt._chunks
    if not chunks:
        raise VisionError("the prompt is closed")
    out: list[ImageChunk] = []
    for i in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, i)
        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            copy = mtmd.mtmd_input_chunk_copy(chunk)
            if not copy:
                raise VisionError("libmtmd could not keep an image of the prompt")
            out.append(ImageChunk(prompt._projector, copy))
    return out


_NO_CALLBACK = mtmd.mtmd_helper_post_decode_callback() if mtmd is not None else None  # NULL: no callback
