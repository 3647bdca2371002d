"""Writes a tiny random-weight llama GGUF that real llama.cpp loads (in milliseconds) and runs.

Self-contained: the byte-level SentencePiece-style vocabulary is built here, so no vocab
file from the llama.cpp sources is needed. The vocabulary has <unk>, <s>, </s>, the 256
byte tokens <0x00>..<0xFF> (type BYTE, so any UTF-8 text tokenizes), "▁", letters, digits,
punctuation and all lowercase letter pairs, plus any `extra_tokens` as CONTROL tokens
(e.g. "<|im_start|>" for a chatml template). With ~1000 tokens and small random weights
the next-token distribution is nearly uniform, so </s> is reachable but unlikely (~0.1 %
per token). Tensor layout: n_embd 64, 2 layers, 4 heads, n_ff 128; f32; about 1 MB.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, PoolingType, TokenType

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 128
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


def tiny_vocab(extra_tokens: Sequence[str] = ()) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) of the test vocabulary."""
    tokens: list[str] = ["<unk>", "<s>", "</s>"]
    types: list[int] = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    scores: list[float] = [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(TokenType.BYTE)
        scores.append(0.0)
    singles = ["▁"] + list(string.ascii_letters) + list(string.digits) + list(".,!?;:'\"-()")
    pairs = ["▁" + c for c in string.ascii_lowercase] + [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
    for i, piece in enumerate(singles):
        tokens.append(piece)
        types.append(TokenType.NORMAL)
        scores.append(-1.0 - i * 1e-3)
    for i, piece in enumerate(pairs):
        tokens.append(piece)
        types.append(TokenType.NORMAL)
        scores.append(-2.0 - i * 1e-3)  # merges of pairs; higher score merges first
    for piece in extra_tokens:
        if piece in tokens:
            continue
        tokens.append(piece)
        types.append(TokenType.CONTROL)
        scores.append(0.0)
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(
    path: str | Path,
    *,
    chat_template: str | None = None,
    n_ctx_train: int = 512,
    seed: int = 0,
    extra_tokens: Sequence[str] = (),
    name: str = "tiny-random-llama",
    pooling_type: int | None = None,
    n_head: int = N_HEAD,
    logit_scale: float = 1.0,
    parameter_count: int | None = None,
) -> Path:
    """Write the tiny model to `path` and return it. `pooling_type` (gguf.PoolingType: 1 mean,
    2 cls, 3 last) declares it an embedding model, as embedding models' files do. `n_head` 2
    gives heads of 32 values, which a quantized K cache needs (its blocks are 32 wide).
    `logit_scale` multiplies the output weights: large values give a model sure of its next token
    (greedy picks with wide margins, and loops that prompt lookup can draft). `parameter_count`:
    the general.parameter_count the file declares (Auto reads a model's size from it)."""
    path = Path(path)
    tokens, scores, types = tiny_vocab(extra_tokens)
    n_vocab = len(tokens)
    w = GGUFWriter(str(path), arch="llama")
    w.add_name(name)
    if parameter_count is not None:
        w.add_uint64("general.parameter_count", parameter_count)
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(N_EMBD // n_head)
    w.add_vocab_size(n_vocab)
    w.add_file_type(0)  # all f32
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    if pooling_type is not None:
        w.add_pooling_type(PoolingType(pooling_type))

    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    w.add_tensor("token_embd.weight", rand(n_vocab, N_EMBD))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    w.add_tensor("output.weight", rand(n_vocab, N_EMBD) * np.float32(logit_scale))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, np.float32))
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + t + ".weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", rand(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", rand(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
