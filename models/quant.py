"""Quantization labels ("Q4_K_M", "F16", ...) from a GGUF file-type number or a file name."""

from __future__ import annotations

import re
from pathlib import PurePath

from gguf.constants import LlamaFileType

# I?Q<bits> with at least one known suffix part (Q4_K_M, IQ2_XXS, Q8_0, Q4_K_XL), ternary
# TQ1_0/TQ2_0, or a float/MXFP4 format. Bounded by non-alphanumerics so "Qwen" never matches.
_LABEL = re.compile(
    r"(?<![A-Za-z0-9])("
    r"I?Q[1-8](?:_(?:K|[0-9]|XXS|XS|S|M|L|XL|NL))+"
    r"|TQ[12]_0|BF16|F16|F32|MXFP4(?:_MOE)?"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def quant_from_file_type(file_type: int) -> str | None:
    """Label for `general.file_type` (llama.cpp's llama_ftype), or None if unknown or 'guessed'."""
    try:
        ftype = LlamaFileType(file_type)
    except ValueError:
        return None
    if ftype is LlamaFileType.GUESSED:
        return None
    return ftype.name.removeprefix("MOSTLY_").removeprefix("ALL_")


def quant_from_filename(filename: str) -> str | None:
    """Label found in a file name such as 'Qwen2.5-7B-Instruct-Q4_K_M.gguf' (the last one wins)."""
    stem = PurePath(filename).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    matches = _LABEL.findall(stem)
    return matches[-1].upper() if matches else None
