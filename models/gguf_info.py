"""What a GGUF model file says about itself (name, architecture, sizes, tokenizer, chat template), and its sha256.

Reads only the header, through the bounded validator in `models.gguf_validate`, so
asking about a file never costs more than validating it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from gguf.constants import Keys

from models.gguf_validate import GGUFArray, GGUFHeader, MetadataValue, read_gguf_header
from models.quant import quant_from_file_type, quant_from_filename


@dataclass(frozen=True)
class GGUFInfo:
    path: str
    file_size: int
    name: str | None  # general.name
    architecture: str  # general.architecture
    parameter_count: int | None  # general.parameter_count if present, else the sum of tensor element counts
    quant: str | None  # e.g. "Q4_K_M", from general.file_type, else from the file name
    context_length: int | None  # {arch}.context_length: the context the model was trained for
    block_count: int | None
    # head_count and head_count_kv may be per-layer lists in some models (e.g. OpenELM);
    # for those we report the largest value, the figure that bounds KV-cache memory.
    head_count: int | None
    head_count_kv: int | None
    embedding_length: int | None
    vocab_size: int | None  # len(tokenizer.ggml.tokens), else {arch}.vocab_size
    has_chat_template: bool  # a non-blank tokenizer.chat_template is present
    chat_template: str | None  # tokenizer.chat_template, verbatim (untrusted: render only sandboxed)
    bos_token_id: int | None
    eos_token_id: int | None


def read_gguf_info(path: str | Path) -> GGUFInfo:
    """Validate `path` and describe it. Raises InvalidModelFile."""
    return info_from_header(read_gguf_header(path))


def info_from_header(header: GGUFHeader) -> GGUFInfo:
    """Describe an already validated header."""
    meta = header.metadata
    arch = str(meta[Keys.General.ARCHITECTURE])
    template = _str(meta, Keys.Tokenizer.CHAT_TEMPLATE)
    tokens = meta.get(Keys.Tokenizer.LIST)
    vocab_size = tokens.length if isinstance(tokens, GGUFArray) else _int(meta, Keys.LLM.VOCAB_SIZE.format(arch=arch))
    file_type = _int(meta, Keys.General.FILE_TYPE)
    quant = quant_from_file_type(file_type) if file_type is not None else None
    params = _int(meta, "general.parameter_count")
    if params is None:
        params = sum(t.n_elements for t in header.tensors) or None
    return GGUFInfo(
        path=header.path,
        file_size=header.file_size,
        name=_str(meta, Keys.General.NAME),
        architecture=arch,
        parameter_count=params,
        quant=quant or quant_from_filename(header.path),
        context_length=_int(meta, Keys.LLM.CONTEXT_LENGTH.format(arch=arch)),
        block_count=_int(meta, Keys.LLM.BLOCK_COUNT.format(arch=arch)),
        head_count=_int(meta, Keys.Attention.HEAD_COUNT.format(arch=arch)),
        head_count_kv=_int(meta, Keys.Attention.HEAD_COUNT_KV.format(arch=arch)),
        embedding_length=_int(meta, Keys.LLM.EMBEDDING_LENGTH.format(arch=arch)),
        vocab_size=vocab_size,
        has_chat_template=bool(template and template.strip()),
        chat_template=template,
        bos_token_id=_int(meta, Keys.Tokenizer.BOS_ID),
        eos_token_id=_int(meta, Keys.Tokenizer.EOS_ID),
    )


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of the file's bytes, read in chunks of `chunk_size`."""
    digest = hashlib.sha256()
    buf = bytearray(chunk_size)
    view = memoryview(buf)
    with Path(path).open("rb") as f:
        while n := f.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


def _str(meta: dict[str, MetadataValue], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) else None


def _int(meta: dict[str, MetadataValue], key: str) -> int | None:
    """An integer entry; for a per-layer list of integers, its largest value."""
    value = meta.get(key)
    if isinstance(value, GGUFArray):
        ints = [v for v in value.values or () if isinstance(v, int) and not isinstance(v, bool)]
        return max(ints) if ints else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None
