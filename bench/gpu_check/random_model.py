"""Write a random-weight Llama GGUF of a realistic shape for bench/gpu_check.sh, in seconds.

Speed depends on a model's shape and tensor types, not on its weights' values, so the check
needs no download: `1b` is shaped like a 1B Llama (n_embd 2048, 16 layers, 32 query and 8 KV
heads, n_ff 8192, a 32000-token vocabulary: about 1.1 B parameters, 1.2 GB at Q8_0); `tiny`
(n_embd 256, 2 layers, 1000 tokens) is for a dry run of the script's plumbing on a CPU.

Every matrix is Q8_0, written as raw blocks (a small fixed fp16 scale and random int8 values,
so weights are about N(0, 0.04) and activations stay finite), and one random block buffer per
shape is shared by all layers, so writing costs little more than the disk. The vocabulary is
a SentencePiece-style ("llama") one: <unk>, <s>, </s>, the 256 byte tokens, then filler pieces.

    python random_model.py OUT.gguf [--shape 1b|tiny]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, TokenType

Q8_0_BLOCK = 32  # values per block
Q8_0_BYTES = 34  # an fp16 scale and 32 int8 values
SCALE = 0.0005  # int8 values of about +-73 (uniform over -128..127) times this: std about 0.04


@dataclass(frozen=True)
class Shape:
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int


SHAPES = {
    "1b": Shape(n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192, n_vocab=32000, n_ctx_train=4096),
    "tiny": Shape(n_embd=256, n_layer=2, n_head=4, n_head_kv=4, n_ff=512, n_vocab=1000, n_ctx_train=2048),
}


def vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): <unk>, <s>, </s>, the byte tokens, then "▁w<i>" fillers up to n_vocab."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    if n_vocab < len(tokens) + 1:
        raise ValueError(f"a vocabulary needs more than {len(tokens)} tokens")
    tokens.append("▁")
    types.append(TokenType.NORMAL)
    i = 0
    while len(tokens) < n_vocab:
        tokens.append(f"▁w{i}")
        types.append(TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-1.0 - k * 1e-4 for k in range(n_vocab - 259)]
    return tokens, scores, [int(t) for t in types]


def q8_0_blocks(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, cols / 32 * 34) uint8 array of Q8_0 blocks: the fixed scale, then random int8 values."""
    if cols % Q8_0_BLOCK:
        raise ValueError(f"Q8_0 rows need a multiple of {Q8_0_BLOCK} values, not {cols}")
    blocks = np.empty((rows, cols // Q8_0_BLOCK, Q8_0_BYTES), np.uint8)
    blocks[..., :2] = np.frombuffer(np.float16(SCALE).tobytes(), np.uint8)
    blocks[..., 2:] = rng.integers(0, 256, size=(rows, cols // Q8_0_BLOCK, Q8_0_BLOCK), dtype=np.uint8)
    return blocks.reshape(rows, -1)


def write_model(path: Path, shape: Shape, seed: int = 0) -> Path:
    """Write the random model of `shape` to `path` and return it."""
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocab(shape.n_vocab)
    head_dim = shape.n_embd // shape.n_head
    n_kv = shape.n_head_kv * head_dim
    w = GGUFWriter(str(path), arch="llama")
    w.add_name(f"random-llama-{shape.n_layer}L-{shape.n_embd}")
    w.add_context_length(shape.n_ctx_train)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(shape.n_vocab)
    w.add_file_type(7)  # LLAMA_FTYPE_MOSTLY_Q8_0
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    shared: dict[tuple[int, int], np.ndarray] = {}

    def q8(rows: int, cols: int) -> np.ndarray:
        if (rows, cols) not in shared:
            shared[(rows, cols)] = q8_0_blocks(rows, cols, rng)
        return shared[(rows, cols)]

    def add_q8(name: str, rows: int, cols: int) -> None:
        w.add_tensor(name, q8(rows, cols), raw_dtype=GGMLQuantizationType.Q8_0)

    ones = np.ones(shape.n_embd, np.float32)
    add_q8("token_embd.weight", shape.n_vocab, shape.n_embd)
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", q8_0_blocks(shape.n_vocab, shape.n_embd, rng), raw_dtype=GGMLQuantizationType.Q8_0)
    for i in range(shape.n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "ffn_norm.weight", ones)
        add_q8(p + "attn_q.weight", shape.n_embd, shape.n_embd)
        add_q8(p + "attn_k.weight", n_kv, shape.n_embd)
        add_q8(p + "attn_v.weight", n_kv, shape.n_embd)
        add_q8(p + "attn_output.weight", shape.n_embd, shape.n_embd)
        add_q8(p + "ffn_gate.weight", shape.n_ff, shape.n_embd)
        add_q8(p + "ffn_up.weight", shape.n_ff, shape.n_embd)
        add_q8(p + "ffn_down.weight", shape.n_embd, shape.n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="random_model.py", description="write a random-weight Llama GGUF")
    parser.add_argument("out", help="the GGUF file to write")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="1b")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"random_model: the folder {out.parent} does not exist", file=sys.stderr)
        return 2
    try:
        write_model(out, SHAPES[args.shape])
    except OSError as exc:
        print(f"random_model: {out} could not be written: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
