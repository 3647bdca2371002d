"""Writes small valid GGUF files with gguf's GGUFWriter, and locates fields in them for byte patching.

The locations come from gguf's own GGUFReader (fast on these tiny files), so tests that
corrupt bytes do not depend on the parser they are testing.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFWriter

DEFAULT_TOKENS = ("<unk>", "<s>", "</s>", "a", "b", "c", "hello", "world")
TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"


def write_tiny_gguf(
    path: str | Path,
    *,
    arch: str = "llama",
    name: str | None = "Tiny Test Model",
    context_length: int = 256,
    block_count: int = 2,
    head_count: int | Sequence[int] = 4,
    head_count_kv: int | Sequence[int] = 2,
    embedding_length: int = 16,
    tokens: Sequence[str] | None = DEFAULT_TOKENS,
    chat_template: str | None = TEMPLATE,
    file_type: int | None = None,
    alignment: int | None = None,
    extra_kv: dict[str, str] | None = None,
    tensors: dict[str, np.ndarray[Any, Any]] | None = None,
) -> Path:
    """A tiny but well-formed GGUF: a few KV pairs and (by default) three small tensors."""
    path = Path(path)
    w = GGUFWriter(path, arch)
    if name is not None:
        w.add_name(name)
    w.add_context_length(context_length)
    w.add_block_count(block_count)
    w.add_head_count(head_count)
    w.add_head_count_kv(head_count_kv)
    w.add_embedding_length(embedding_length)
    if tokens is not None:
        w.add_token_list(list(tokens))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    if file_type is not None:
        w.add_file_type(file_type)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value in (extra_kv or {}).items():
        w.add_string(key, value)
    if tensors is None:
        rng = np.random.default_rng(0)
        tensors = {
            "token_embd.weight": rng.standard_normal((8, 16)).astype(np.float32),
            "blk.0.attn_norm.weight": rng.standard_normal(16).astype(np.float32),
            "output.weight": rng.standard_normal((8, 16)).astype(np.float16),
        }
    for tname, array in tensors.items():
        w.add_tensor(tname, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@dataclass(frozen=True)
class TensorSpot:
    name: str
    start: int  # offset of the name length
    n_dims_at: int
    dims_at: int
    type_at: int
    offset_at: int


@dataclass(frozen=True)
class Layout:
    """Byte offsets of the fields of a GGUF file, for patching."""

    n_tensors_at: int
    n_kv_at: int
    kv_start: dict[str, int] = field(default_factory=dict)  # offset of each key's length
    tensors: tuple[TensorSpot, ...] = ()
    data_start: int = 0

    def kv_type_at(self, key: str) -> int:
        return self.kv_start[key] + 8 + len(key.encode())

    def kv_value_at(self, key: str) -> int:
        """For a string: its length; for an array: its item type (the length follows 4 bytes later)."""
        return self.kv_type_at(key) + 4

    def tensor(self, name: str) -> TensorSpot:
        return next(t for t in self.tensors if t.name == name)


def layout_of(path: str | Path) -> Layout:
    reader = GGUFReader(path)
    kv = {name: f.offset for name, f in reader.fields.items() if not name.startswith("GGUF.")}
    spots = []
    for t in reader.tensors:
        start = t.field.offset
        n_dims_at = start + 8 + len(t.name.encode())
        n_dims = len(t.shape)
        dims_at = n_dims_at + 4
        type_at = dims_at + 8 * n_dims
        spots.append(TensorSpot(t.name, start, n_dims_at, dims_at, type_at, type_at + 4))
    return Layout(8, 16, kv, tuple(spots), reader.data_offset)


def patch(path: str | Path, offset: int, fmt: str, value: Any) -> None:
    """Overwrite the bytes at `offset` with struct.pack(fmt, value)."""
    with Path(path).open("r+b") as f:
        f.seek(offset)
        f.write(struct.pack(fmt, value))


def truncate(path: str | Path, size: int) -> None:
    with Path(path).open("r+b") as f:
        f.truncate(size)
