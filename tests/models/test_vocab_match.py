"""Draft models must share the vocabulary of the model they draft for: two files with the same
token list match whatever their weights, and another count, other texts under the same ids,
other special tokens or another tokenizer do not, each with its reason; a file with no token
list or a damaged one is a sentence, not a traceback."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from models.gguf_validate import InvalidModelFile
from models.vocab_match import read_vocabulary, same_vocabulary
from tests.support.tiny_model import write_tiny_gguf


def test_the_same_token_list_matches_whatever_the_weights(tmp_path: Path) -> None:
    a = write_tiny_gguf(tmp_path / "a.gguf", seed=1)
    b = write_tiny_gguf(tmp_path / "b.gguf", seed=2, chat_template="{{ messages }}", name="other")
    assert a.read_bytes() != b.read_bytes()
    va, vb = read_vocabulary(a), read_vocabulary(b)
    assert va == vb and va.tokenizer == "llama" and va.special == (1, 2) and len(va.digest) == 64
    assert same_vocabulary(a, b) is None


def test_another_count_or_other_texts_under_the_same_ids_do_not_match(tmp_path: Path) -> None:
    base = write_tiny_gguf(tmp_path / "base.gguf", extra_tokens=("<a>",))
    more = write_tiny_gguf(tmp_path / "more.gguf", extra_tokens=("<a>", "<b>"))
    other = write_tiny_gguf(tmp_path / "other.gguf", extra_tokens=("<z>",))  # as many tokens, one text differs
    vb, vm, vo = read_vocabulary(base), read_vocabulary(more), read_vocabulary(other)
    assert vm.n_tokens == vb.n_tokens + 1 and vo.n_tokens == vb.n_tokens
    assert vb.mismatch(vm) == f"{vm.n_tokens:,} tokens instead of {vb.n_tokens:,}"
    assert vb.mismatch(vo) == "other tokens under the same ids"
    assert same_vocabulary(base, other) == "other tokens under the same ids"


def test_special_tokens_and_the_tokenizer_count_too(tmp_path: Path) -> None:
    v = read_vocabulary(write_tiny_gguf(tmp_path / "m.gguf"))
    assert v.mismatch(replace(v, special=(2, 1))) == "other start and end tokens"
    assert v.mismatch(replace(v, tokenizer="gpt2")) == "a gpt2 tokenizer instead of llama"


def test_a_file_without_a_token_list_or_a_damaged_one_is_a_sentence(tmp_path: Path) -> None:
    bare = tmp_path / "bare.gguf"
    w = GGUFWriter(str(bare), arch="llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(InvalidModelFile, match="bare.gguf has no token list, so no model can draft for it"):
        read_vocabulary(bare)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(write_tiny_gguf(tmp_path / "whole.gguf").read_bytes()[:5000])
    with pytest.raises(InvalidModelFile, match="incomplete"):
        read_vocabulary(cut)
