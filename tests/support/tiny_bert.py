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
