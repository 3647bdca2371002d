"""A small llama-shaped GGUF with its data section inflated (for reading headers of large remote files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from tests.support.tiny_model import tiny_vocab


def write_padded_gguf(path: Path, pad_mib: int = 8, extra_tokens: int = 0) -> Path:
    """A small llama-shaped GGUF whose data section is inflated by a `pad_mib` MiB tensor; with
    `extra_tokens` long vocabulary entries its header grows past a few KiB."""
    tokens, scores, types = tiny_vocab([f"<|extra_token_number_{i:06d}|>" for i in range(extra_tokens)])
    w = GGUFWriter(str(path), arch="llama")
    w.add_name("padded tiny")
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(2)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_vocab_size(len(tokens))
    w.add_file_type(7)  # Q8_0 (the label only; the tensors are f32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((len(tokens), 64)).astype(np.float32))
    for i in range(2):
        w.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float32))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rng.standard_normal((128, 64)).astype(np.float32))
    w.add_tensor("output.weight", np.zeros((pad_mib * 1024, 256), np.float32))  # the padding
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
