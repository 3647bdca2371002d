"""Checks that a file is a well-formed GGUF model before any native code reads it.

Owns the one bounded parser of the GGUF header (metadata and tensor table). Every
count and length in the file is checked against a cap and against the bytes that
remain before anything is read or allocated; the first problem found becomes one
readable sentence in `InvalidModelFile`. `read_gguf_header` hands back what it
parsed so `models.gguf_info` never parses the file a second time; `read_gguf_header_bytes`
does the same from the first bytes of a file known only by its size (a file on the Hub),
raising `NeedMoreBytes` until it has been given enough.

The checks mirror, and tighten, llama.cpp's own in ggml/src/gguf.cpp; the type tables
come from the `gguf` package (why not its `GGUFReader`: docs/decisions/gguf-validation.md).
"""

from __future__ import annotations

import io
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from models.gguf_errors import InvalidModelFile as InvalidModelFile  # the errors live apart, see there
from models.gguf_errors import NeedMoreBytes as NeedMoreBytes

MAX_TENSORS = 100_000
MAX_KV = 10_000
MAX_KEY_LENGTH = 256
MAX_STRING_LENGTH = 16 * 1024 * 1024
MAX_ARRAY_LENGTH = 4_000_000  # real tokenizer arrays reach ~262k items
MAX_TENSOR_NAME = 63  # GGML_MAX_NAME is 64 including the terminating NUL
MAX_DIMS = 4
MAX_DIM_SIZE = 1 << 40
MAX_ELEMENTS = (1 << 63) - 1  # INT64_MAX, as in gguf.cpp
MAX_KEPT_TEXT = 64 * 1024 * 1024  # metadata text held in memory, all entries together
KEEP_STRINGS = 256  # lists of text up to this length keep their values; longer ones only their length
KEEP_NUMBERS = 4096  # the same for lists of numbers (per-layer values)
_HEADER_SIZE = 24  # magic, version, n_tensors, n_kv
_CHUNK = 1 << 20

_V = GGUFValueType
_SCALARS: dict[int, struct.Struct] = {  # every fixed-size value type, little-endian
    t: struct.Struct("<" + code)
    for t, code in zip(
        (_V.UINT8, _V.INT8, _V.UINT16, _V.INT16, _V.UINT32, _V.INT32, _V.FLOAT32, _V.BOOL, _V.UINT64, _V.INT64, _V.FLOAT64),
        "BbHhIifbQqd",
        strict=True,
    )
}
_U32 = _SCALARS[_V.UINT32]
_U64 = _SCALARS[_V.UINT64]

Scalar = int | float | bool | str


@dataclass(frozen=True)
class GGUFArray:
    """A metadata list. `values` is kept only for short lists (KEEP_STRINGS / KEEP_NUMBERS items)."""

    item_type: GGUFValueType
    length: int
    values: tuple[Scalar, ...] | None


MetadataValue = Scalar | GGUFArray


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    ggml_type: GGMLQuantizationType
    shape: tuple[int, ...]  # GGUF order: fastest-varying dimension first
    n_elements: int
    n_bytes: int
    offset: int  # relative to the start of the data section


@dataclass(frozen=True)
class GGUFHeader:
    """Everything before the tensor data, as validated. `metadata` must not be mutated."""

    path: str
    file_size: int
    version: int
    metadata: dict[str, MetadataValue]
    tensors: tuple[GGUFTensor, ...]
    alignment: int
    data_start: int  # absolute byte offset of the data section
    data_end: int  # absolute byte offset just past the last tensor's bytes


def validate_gguf(path: str | Path) -> None:
    """Raise InvalidModelFile unless `path` is a GGUF file that llama.cpp can safely parse."""
    read_gguf_header(path)


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Validate `path` and return its parsed header. Raises InvalidModelFile, nothing else."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
        if stat.S_ISDIR(mode):
            raise InvalidModelFile(f"not a file but a folder: {p}")
        if not stat.S_ISREG(mode):  # a FIFO or a device could block or never end
            raise InvalidModelFile(f"not a regular file: {p}")
        with p.open("rb") as f:
            return _parse(_Cursor(f, os.fstat(f.fileno()).st_size), str(p))
    except FileNotFoundError:
        raise InvalidModelFile(f"no such file: {p}") from None
    except PermissionError:
        raise InvalidModelFile(f"no permission to read the file: {p}") from None
    except OSError as exc:
        raise InvalidModelFile(f"cannot read the file {p}: {exc.strerror or exc}") from None


def read_gguf_header_bytes(data: bytes, file_size: int, path: str = "") -> GGUFHeader:
    """Parse a header from the first `len(data)` bytes of a file of `file_size` bytes.

    Every check of `read_gguf_header` applies, against the full file size (so a remote
    file can be judged from its start). Raises NeedMoreBytes when the header goes on past
    `data`, InvalidModelFile for anything wrong with the file.
    """
    if len(data) > file_size:
        raise ValueError(f"a prefix of {len(data)} bytes is longer than the file ({file_size} bytes)")
    return _parse(_PrefixCursor(data, file_size), path)


def _parse(cur: _Cursor, path: str) -> GGUFHeader:
    if cur.size == 0:
        raise InvalidModelFile("not a GGUF model file: it is empty")
    magic = cur.take(min(4, cur.size), "the file signature")
    if magic != b"GGUF":
        raise InvalidModelFile(f"not a GGUF model file: it starts with {magic!r} instead of b'GGUF'")
    if cur.size < _HEADER_SIZE:
        raise InvalidModelFile(f"not a GGUF model file: the header ends early at byte {cur.size}")
    version = cur.u32("the version")
    _check_version(version)
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the metadata count")
    if n_tensors > MAX_TENSORS:
        raise _damaged(f"the file claims to hold {n_tensors} tensors, more than the {MAX_TENSORS} any real model has")
    if n_kv > MAX_KV:
        raise _damaged(f"the file claims to hold {n_kv} metadata entries, more than the {MAX_KV} allowed")
    metadata = _read_metadata(cur, n_kv)
    alignment = _alignment(metadata)
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise InvalidModelFile("the file does not say what kind of model it is (no 'general.architecture' text)")
    tensors = _read_tensor_infos(cur, n_tensors, alignment)
    # As gguf.cpp: the data section starts at the next multiple of the alignment, if there are tensors.
    data_start = _pad(cur.pos, alignment) if tensors else cur.pos
    data_end = data_start + (tensors[-1].offset + tensors[-1].n_bytes if tensors else 0)
    padded_end = data_start + sum(_pad(t.n_bytes, alignment) for t in tensors)
    if data_end > cur.size:
        raise InvalidModelFile(f"the file is incomplete: tensor data ends at byte {data_end} but the file has {cur.size} bytes")
    if tensors and cur.size > padded_end:  # tighter than llama.cpp, as the research asks
        raise InvalidModelFile(
            f"the file has {cur.size - padded_end} unexpected bytes after the tensor data ends at byte "
            f"{padded_end}; it is damaged or several files were joined together"
        )
    return GGUFHeader(path, cur.size, version, metadata, tensors, alignment, data_start, data_end)


def _check_version(version: int) -> None:
    if version & 0xFFFF == 0 and version != 0:
        raise InvalidModelFile(
            "this GGUF file was written with the wrong endianness (big-endian byte order) and cannot be used on this computer"
        )
    if version == 1:
        raise InvalidModelFile("this GGUF file uses format version 1, which is too old; get a newer conversion of it")
    if version > 3:
        raise InvalidModelFile(f"this GGUF file uses format version {version}, newer than this app understands (2 or 3)")
    if version not in (2, 3):
        raise InvalidModelFile(f"not a GGUF model file: format version {version} does not exist")


def _read_metadata(cur: _Cursor, n_kv: int) -> dict[str, MetadataValue]:
    metadata: dict[str, MetadataValue] = {}
    for i in range(n_kv):
        klen = cur.u64(f"the name of metadata entry {i + 1}")
        if klen == 0:
            raise _damaged(f"metadata entry {i + 1} has an empty name")
        if klen > MAX_KEY_LENGTH:
            raise _damaged(f"metadata entry {i + 1} has a name {klen} bytes long (the limit is {MAX_KEY_LENGTH})")
        try:
            key = cur.take(klen, f"the name of metadata entry {i + 1}").decode("utf-8")
        except UnicodeDecodeError:
            raise _damaged(f"the name of metadata entry {i + 1} is not valid text") from None
        label = _quote(key)
        if key in metadata:
            raise _damaged(f"metadata '{label}' appears twice")
        metadata[key] = _read_value(cur, label, cur.u32(f"metadata '{label}'"))
    return metadata


def _read_value(cur: _Cursor, label: str, vtype: int) -> MetadataValue:
    """Read one value; `label` is the entry's name as shown in messages."""
    if vtype == _V.ARRAY:
        return _read_array(cur, label)
    if vtype == _V.STRING:
        return _read_string(cur, label)
    fmt = _SCALARS.get(vtype)
    if fmt is None:
        raise _damaged(f"metadata '{label}' has an unknown value type {vtype}")
    value = fmt.unpack(cur.take(fmt.size, f"metadata '{label}'"))[0]
    return bool(value) if vtype == _V.BOOL else value


def _read_string(cur: _Cursor, label: str) -> str:
    n = _string_length(cur, label)
    cur.kept_text += n
    if cur.kept_text > MAX_KEPT_TEXT:
        raise _damaged(f"the metadata holds more than {MAX_KEPT_TEXT >> 20} MiB of text")
    return cur.take(n, f"the text of metadata '{label}'").decode("utf-8", errors="replace")


def _string_length(cur: _Cursor, label: str) -> int:
    n = cur.u64(f"metadata '{label}'")
    if n > MAX_STRING_LENGTH:
        raise _damaged(f"metadata '{label}' holds a text of {n} bytes, over the {MAX_STRING_LENGTH >> 20} MiB limit")
    if n > cur.size - cur.pos:
        raise InvalidModelFile(f"the file is incomplete: the text of metadata '{label}' ({n} bytes) runs past the end of the file")
    return n


def _read_array(cur: _Cursor, label: str) -> GGUFArray:
    item_type = cur.u32(f"metadata '{label}'")
    length = cur.u64(f"metadata '{label}'")
    if item_type == _V.ARRAY:
        raise _damaged(f"metadata '{label}' is a list of lists, which GGUF does not allow")
    if item_type != _V.STRING and item_type not in _SCALARS:
        raise _damaged(f"metadata '{label}' is a list of an unknown value type {item_type}")
    if length > MAX_ARRAY_LENGTH:
        raise _damaged(f"metadata '{label}' is a list of {length} items, over the limit of {MAX_ARRAY_LENGTH}")
    # Each text item needs at least its 8-byte length: a cheap bound before any loop.
    min_item = 8 if item_type == _V.STRING else _SCALARS[item_type].size
    if length * min_item > cur.size - cur.pos:
        raise InvalidModelFile(f"the file is incomplete: metadata '{label}' is a list of {length} items that runs past the end of the file")
    gtype = GGUFValueType(item_type)
    if item_type == _V.STRING:
        if length > KEEP_STRINGS:
            cur.skip_strings(length, label)
            return GGUFArray(gtype, length, None)
        return GGUFArray(gtype, length, tuple(_read_string(cur, label) for _ in range(length)))
    fmt = _SCALARS[item_type]
    if length > KEEP_NUMBERS:
        cur.skip(length * fmt.size, f"metadata '{label}'")
        return GGUFArray(gtype, length, None)
    values = [v[0] for v in fmt.iter_unpack(cur.take(length * fmt.size, f"metadata '{label}'"))]
    return GGUFArray(gtype, length, tuple(bool(v) for v in values) if item_type == _V.BOOL else tuple(values))


def _alignment(metadata: dict[str, MetadataValue]) -> int:
    if "general.alignment" not in metadata:
        return GGUF_DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    # gguf.cpp insists on uint32; we accept any whole number and check what matters: a power of two.
    if not isinstance(value, int) or isinstance(value, bool):
        raise _damaged("metadata 'general.alignment' must be a whole number")
    if value <= 0 or value & (value - 1) != 0:
        raise _damaged(f"metadata 'general.alignment' is {value}, which is not a power of two")
    return value


def _read_tensor_infos(cur: _Cursor, n_tensors: int, alignment: int) -> tuple[GGUFTensor, ...]:
    # Smallest possible entry: name length 8, n_dims 4, one dim 8, type 4, offset 8.
    if n_tensors * 32 > cur.size - cur.pos:
        raise InvalidModelFile(f"the file is incomplete: it says it holds {n_tensors} tensors but ends before listing them")
    tensors: list[GGUFTensor] = []
    seen: set[str] = set()
    running = 0  # where the next tensor must start: the sum of padded sizes so far (as gguf.cpp)
    for i in range(n_tensors):
        what = f"the description of tensor {i + 1}"
        nlen = cur.u64(what)
        if nlen > MAX_TENSOR_NAME:
            raise _damaged(f"tensor {i + 1} has a name {nlen} bytes long (the limit is {MAX_TENSOR_NAME})")
        real_name = cur.take(nlen, what).decode("utf-8", errors="replace")
        name = _quote(real_name)
        if real_name in seen:
            raise _damaged(f"tensor '{name}' appears twice")
        seen.add(real_name)
        n_dims = cur.u32(what)
        if not 1 <= n_dims <= MAX_DIMS:
            raise _damaged(f"tensor '{name}' has {n_dims} dimensions, but GGUF allows 1 to {MAX_DIMS}")
        shape = tuple(cur.u64(what) for _ in range(n_dims))
        n_elements = _element_count(name, shape)
        ggml_type = _tensor_type(name, cur.u32(what))
        block, type_size = GGML_QUANT_SIZES[ggml_type]
        if shape[0] % block != 0:
            raise _damaged(f"tensor '{name}' has rows of {shape[0]} values, not a multiple of its block size {block}")
        n_bytes = n_elements // block * type_size
        offset = cur.u64(what)
        if offset != running:
            raise InvalidModelFile(
                f"tensor '{name}' starts at data offset {offset} but should start at {running}: "
                "the tensors overlap or have gaps, so the file is damaged"
            )
        running += _pad(n_bytes, alignment)
        tensors.append(GGUFTensor(real_name, ggml_type, shape, n_elements, n_bytes, offset))
    return tuple(tensors)


def _element_count(name: str, shape: tuple[int, ...]) -> int:
    count = 1
    for j, dim in enumerate(shape):
        if dim >= 1 << 63:  # int64 in gguf.cpp
            raise _damaged(f"tensor '{name}' has a negative size in dimension {j + 1}")
        if dim > MAX_DIM_SIZE:
            raise _damaged(f"tensor '{name}' has an impossible size {dim} in dimension {j + 1}")
        count *= dim
    if count > MAX_ELEMENTS:
        raise _damaged(f"tensor '{name}' has an impossible shape {shape}")
    return count


def _tensor_type(name: str, raw_type: int) -> GGMLQuantizationType:
    known = raw_type in GGMLQuantizationType._value2member_map_
    if not known or GGMLQuantizationType(raw_type) not in GGML_QUANT_SIZES:
        raise InvalidModelFile(
            f"tensor '{name}' uses an unknown number format (type {raw_type}); the file is damaged or needs a newer version of this app"
        )
    return GGMLQuantizationType(raw_type)


class _Cursor:
    """Little-endian reads from a file; every read is checked against the file size first."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self.size = size
        self.pos = 0
        self._buf = b""
        self._buf_start = 0
        self.kept_text = 0  # bytes of metadata text kept so far, capped by MAX_KEPT_TEXT

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise InvalidModelFile(f"the file is incomplete: it ends at byte {self.size} in the middle of {what}")

    def _window(self, n: int, what: str) -> int:
        """Make [pos, pos+n) available in the buffer, advance past it, and return its index there."""
        self.need(n, what)
        start = self.pos - self._buf_start
        if start < 0 or start + n > len(self._buf):
            # Bounded: n is a few bytes or a string already checked against its cap and the file size.
            self._f.seek(self.pos)
            self._buf = self._f.read(max(n, _CHUNK))
            self._buf_start, start = self.pos, 0
            if len(self._buf) < n:
                raise InvalidModelFile(f"the file got shorter while it was being read, at byte {self.pos}")
        self.pos += n
        return start

    def take(self, n: int, what: str) -> bytes:
        start = self._window(n, what)
        return self._buf[start : start + n]

    def u32(self, what: str) -> int:
        start = self._window(4, what)  # first: it may replace the buffer
        return int(_U32.unpack_from(self._buf, start)[0])

    def u64(self, what: str) -> int:
        start = self._window(8, what)
        return int(_U64.unpack_from(self._buf, start)[0])

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n

    def skip_strings(self, count: int, label: str) -> None:
        """Skip `count` length-prefixed strings: the hot loop over a 262k-token vocabulary."""
        unpack = _U64.unpack_from
        for _ in range(count):
            i = self.pos - self._buf_start
            if i >= 0 and i + 8 <= len(self._buf) and self.pos + 8 <= self.size:
                n = unpack(self._buf, i)[0]
                self.pos += 8
            else:
                n = self.u64(f"metadata '{label}'")
            if n > MAX_STRING_LENGTH or n > self.size - self.pos:
                self.pos -= 8
                _string_length(self, label)  # re-reads the length and raises the right sentence
            self.pos += n


class _PrefixCursor(_Cursor):
    """A cursor over the first bytes of a longer file: reads past them raise NeedMoreBytes."""

    def __init__(self, data: bytes, size: int) -> None:
        super().__init__(io.BytesIO(data), size)
        self._have = len(data)

    def _window(self, n: int, what: str) -> int:
        self.need(n, what)  # past the end of the whole file: the file itself is short
        if self.pos + n > self._have:
            raise NeedMoreBytes(self.pos + n, self._have)
        return super()._window(n, what)


def _damaged(problem: str) -> InvalidModelFile:
    return InvalidModelFile(f"{problem}; the file is damaged")


def _quote(text: str, limit: int = 80) -> str:
    """A name from the file made safe for a one-line message: escaped, and cut when long."""
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment
