"""Prompts with images in the engine host: a reply's image parts turned into markers its chat template
renders as text, the rendered prompt tokenized with its images (libmtmd), and each image's place in
the prompt's token list held by tokens of its own, so that the prefix cache, the slots and the saved
state compare images as they compare text.

- A marker is `<cove-image NONCE SHA256>`, with a nonce drawn when the projector was opened: text a
  person typed cannot claim an image, and the template sees one plain string per message.
- An image takes `n_pos` places in the token list (its positions in the context), each a negative
  id made from its SHA-256 and its offset (`image_tokens`). Two prompts share a prefix over an image
  only when the same image sits at the same place (Ollama's rule, issue 51): the same bytes, hashed.
  No real token is negative, so a text token never matches an image's.
- Decoded images and each image's preprocessed chunk are kept for the newest few images: a
  conversation's earlier images are not decoded again every turn.

Host-internal, main thread only (it uses the projector).
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.engine.host.prompt_plan import Tokenizer
from app.engine.host.vision import Image, ImageChunk, ImagePiece, Projector, VisionError, image_chunks
from app.engine.protocol import Generate

KEEP_IMAGES = 8  # decoded images and image chunks kept between replies, the newest first
_ID_SPACE = 0x7FFF0000  # image token ids are -1 .. -_ID_SPACE


class ImageRefusal(ValueError):
    """A reply's images cannot be used (a file gone or changed, a picture refused, a model that
    cannot see); the message is one sentence."""


@dataclass(frozen=True)
class ImagePlace:
    """Where an image sits in a prompt's token list: from `start`, `n_pos` places."""

    start: int
    n_pos: int
    sha256: str


def image_tokens(sha256: str, n_pos: int) -> list[int]:
    """The token list's entries for an image: negative, one per position, from its SHA-256."""
    base = int(sha256[:15], 16) % _ID_SPACE
    return [-1 - ((base + i) % _ID_SPACE) for i in range(n_pos)]


class ImagePrompts:
    """The host's images for one loaded model and its projector."""

    def __init__(self, projector: Projector, read_pixels: Callable[[str, str], Image], *, n_ubatch: int) -> None:
        """`read_pixels(sha256, path)`: the image at `path`, decoded (ImageRefusal otherwise);
        `n_ubatch`: the context's micro-batch, which must hold a whole image of a projector that
        decodes with causal attention off (Gemma 3's)."""
        self.projector = projector
        self._n_ubatch = n_ubatch
        self._read_pixels = read_pixels
        self._nonce = secrets.token_hex(8)
        self._marker = re.compile(rf"<cove-image {self._nonce} ([0-9a-f]{{64}})>")
        self._files: Mapping[str, str] = {}
        self._pixels: OrderedDict[str, Image] = OrderedDict()
        self._chunks: OrderedDict[str, ImageChunk] = OrderedDict()
        self._starts: dict[int, str] = {}  # an image's first token id -> its SHA-256
        self._n_pos: dict[str, int] = {}  # an image's positions in the context
        self._sizes: dict[str, tuple[int, int]] = {}  # a decoded image's width and height

    def marker(self, sha256: str) -> str:
        return f"<cove-image {self._nonce} {sha256}>"

    def with_markers(self, messages: Sequence[Mapping[str, Any]], files: Mapping[str, str]) -> list[dict[str, Any]]:
        """`messages` with each content list made one string: text parts as they are, each image
        part as its marker. Every image must be in `files` (SHA-256 -> path); they are the ones
        the next tokenizations read."""
        out: list[dict[str, Any]] = []
        for m in messages:
            content = m.get("content")
            if not isinstance(content, list):
                out.append(dict(m))
                continue
            text: list[str] = []
            for part in content:
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "image":
                    sha = str(part.get("sha256") or "")
                    if sha not in files:
                        raise ImageRefusal(f"the image {sha[:12]}… of the conversation was not sent with it")
                    text.append(self.marker(sha))
                else:
                    text.append(str(part.get("text") or ""))
            out.append({**m, "content": "".join(text)})
        self._files = dict(files)
        return out

    def tokenizer(self, add_bos: Callable[[str], bool]) -> tuple[Callable[[str], list[int]], Callable[[str], list[int]]]:
        """(tokenize a whole prompt, tokenize a continuation) for prompts with markers;
        `add_bos(text)`: whether the model's BOS goes before `text`."""
        return (lambda text: self.tokenize(text, add_special=add_bos(text))), (lambda text: self.tokenize(text, add_special=False))

    def tokenize(self, text: str, *, add_special: bool) -> list[int]:
        """`text` (with markers) as the token list: text tokens, and each image's own entries."""
        parts: list[str | Image] = []
        counted: set[str] = set()  # the images given as placeholders
        at = 0
        for match in self._marker.finditer(text):
            parts.append(text[at : match.start()])
            sha = match.group(1)
            size = self._sizes.get(sha)
            # An image whose chunk is kept is counted from its size alone: its pixels are not
            # copied and preprocessed again each time a turn's prompt is tokenized.
            if size is not None and sha in self._chunks:
                parts.append(Image.placeholder(*size, sha))
                counted.add(sha)
            else:
                parts.append(self._image(sha))
            at = match.end()
        parts.append(text[at:])
        with self.projector.tokenize([p for p in parts if p != ""], add_special=add_special) as prompt:
            pieces = prompt.pieces
            if any(isinstance(p, ImagePiece) and p.sha256 not in self._chunks for p in pieces):
                for chunk in image_chunks(prompt):
                    if chunk.sha256 in counted or chunk.sha256 in self._chunks:
                        chunk.close()  # (a placeholder's, or an image given twice)
                    else:
                        self._keep(self._chunks, chunk.sha256, chunk)
        tokens: list[int] = []
        for piece in pieces:
            if isinstance(piece, ImagePiece):
                if self.projector.non_causal and piece.n_tokens > self._n_ubatch:
                    raise ImageRefusal(
                        f"this model's projector makes {piece.n_tokens} tokens of an image and reads them in one batch, but the "
                        f"engine's batch holds {self._n_ubatch}, so this model cannot be shown images in Cove"
                    )
                run = image_tokens(piece.sha256, piece.n_pos)
                self._starts[run[0]] = piece.sha256
                self._n_pos[piece.sha256] = piece.n_pos
                tokens.extend(run)
            else:
                tokens.extend(piece.tokens)
        return tokens

    def places(self, tokens: Sequence[int]) -> list[ImagePlace]:
        """The images of a token list this host made, in order."""
        out: list[ImagePlace] = []
        i, n = 0, len(tokens)
        while i < n:
            t = tokens[i]
            if t < 0:
                sha = self._starts.get(int(t))
                if sha is None:
                    raise VisionError("the prompt holds an image this engine did not read")
                n_pos = self._n_pos[sha]
                out.append(ImagePlace(i, n_pos, sha))
                i += n_pos
            else:
                i += 1
        return out

    def chunk(self, sha: str) -> ImageChunk:
        """The image's chunk, ready to read into a sequence (tokenized again from its file if it
        was let go since)."""
        chunk = self._chunks.get(sha)
        if chunk is None:
            self.tokenize(self.marker(sha), add_special=False)
            chunk = self._chunks[sha]
        self._chunks.move_to_end(sha)
        return chunk

    def _image(self, sha: str) -> Image:
        image = self._pixels.get(sha)
        if image is not None:
            self._pixels.move_to_end(sha)
            return image
        path = self._files.get(sha)
        if path is None:
            raise ImageRefusal(f"the image {sha[:12]}… of the conversation was not sent with it")
        image = self._read_pixels(sha, path)
        self._keep(self._pixels, sha, image)
        self._sizes[sha] = (image.width, image.height)
        return image

    @staticmethod
    def _keep(memo: OrderedDict[str, Any], key: str, value: Any) -> None:
        old = memo.pop(key, None)
        if old is not None and old is not value and hasattr(old, "close"):
            old.close()
        memo[key] = value
        while len(memo) > KEEP_IMAGES:
            _, gone = memo.popitem(last=False)
            if hasattr(gone, "close"):
                gone.close()

    def close(self) -> None:
        for chunk in self._chunks.values():
            chunk.close()
        self._chunks.clear()
        self._pixels.clear()
        self.projector.close()


def snap(places: Sequence[ImagePlace], n: int) -> int:
    """`n` prompt tokens kept, moved back to an image's start when it falls inside one."""
    for place in places:
        if place.start < n < place.start + place.n_pos:
            return place.start
    return n


def with_images(session: Any, req: Generate, tok: Tokenizer) -> tuple[Generate, Tokenizer]:
    """`req` and `tok` as a reply plans its prompt: unchanged without images; with images, the
    messages with markers and a tokenizer that reads them. `session`: the ModelSession (its
    `images`, None without a projector). Raises ImageRefusal."""
    if not any(_has_image(m) for m in req.messages):
        return req, tok
    images: ImagePrompts | None = session.images
    if images is None:
        raise ImageRefusal(
            f"{session.name} cannot see images: it was loaded without a vision projector (mmproj); send text only, or use a vision model"
        )
    marked = images.with_markers(req.messages, req.images)
    whole, rest = images.tokenizer(session.adds_bos)
    return replace(req, messages=marked), replace(tok, tokenize_prompt=whole, tokenize_rest=rest)


def _has_image(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") == "image" for p in content)
