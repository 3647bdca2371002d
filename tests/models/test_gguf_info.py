"""read_gguf_info: what a written GGUF says about itself comes back exactly; sha256_file is the real hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from gguf.constants import LlamaFileType

from models.gguf_info import read_gguf_info, sha256_file
from models.gguf_validate import InvalidModelFile
from models.quant import quant_from_file_type, quant_from_filename
from tests.support.gguf_files import DEFAULT_TOKENS, TEMPLATE, truncate, write_tiny_gguf


def test_metadata_reads_back(tmp_path: Path) -> None:
    path = write_tiny_gguf(
        tmp_path / "tiny.gguf",
        name="Tiny Chat",
        context_length=4096,
        block_count=3,
        head_count=8,
        head_count_kv=2,
        embedding_length=16,
        file_type=LlamaFileType.MOSTLY_Q4_K_M,
    )
    info = read_gguf_info(path)
    assert info.path == str(path) and info.file_size == path.stat().st_size
    assert info.name == "Tiny Chat" and info.architecture == "llama"
    assert (info.context_length, info.block_count, info.embedding_length) == (4096, 3, 16)
    assert (info.head_count, info.head_count_kv) == (8, 2)
    assert info.vocab_size == len(DEFAULT_TOKENS)
    assert info.has_chat_template and info.chat_template == TEMPLATE
    assert (info.bos_token_id, info.eos_token_id) == (1, 2)
    assert info.quant == "Q4_K_M"
    assert info.parameter_count == 8 * 16 + 16 + 8 * 16  # sum of the three tensors' elements


def test_absent_things_are_none_or_false(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "bare.gguf", name=None, chat_template=None, tokens=None, arch="qwen2")
    info = read_gguf_info(path)
    assert info.architecture == "qwen2" and info.context_length == 256
    assert info.name is None and info.vocab_size is None and info.quant is None
    assert not info.has_chat_template and info.chat_template is None
    assert info.bos_token_id is None and info.eos_token_id is None


def test_blank_template_is_not_a_template(tmp_path: Path) -> None:
    info = read_gguf_info(write_tiny_gguf(tmp_path / "b.gguf", chat_template="   "))
    assert not info.has_chat_template and info.chat_template == "   "


def test_quant_falls_back_to_the_file_name(tmp_path: Path) -> None:
    assert read_gguf_info(write_tiny_gguf(tmp_path / "Tiny-7B-Instruct-IQ4_XS.gguf")).quant == "IQ4_XS"
    guessed = write_tiny_gguf(tmp_path / "tiny.Q8_0.gguf", file_type=LlamaFileType.GUESSED)
    assert read_gguf_info(guessed).quant == "Q8_0"


def test_per_layer_head_counts_report_the_largest(tmp_path: Path) -> None:
    info = read_gguf_info(write_tiny_gguf(tmp_path / "l.gguf", head_count=[4, 8, 6], head_count_kv=[0, 2, 1]))
    assert (info.head_count, info.head_count_kv) == (8, 2)


def test_invalid_file_raises_invalid_model_file(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf")
    truncate(path, 100)
    with pytest.raises(InvalidModelFile, match="incomplete"):
        read_gguf_info(path)


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("gemma-3-270m-q4_k_m.gguf", "Q4_K_M"),
        ("Llama-3-8B.BF16.gguf", "BF16"),
        ("model-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("Qwen-72B.gguf", None),
        ("model-00001-of-00003.gguf", None),
    ],
)
def test_quant_from_filename(label: str, expected: str | None) -> None:
    assert quant_from_filename(label) == expected


def test_quant_from_file_type() -> None:
    assert quant_from_file_type(15) == "Q4_K_M"
    assert quant_from_file_type(0) == "F32"
    assert quant_from_file_type(LlamaFileType.GUESSED) is None
    assert quant_from_file_type(4) is None  # a removed format


@pytest.mark.parametrize("chunk", [1, 1000, 1 << 20])
def test_sha256_file(tmp_path: Path, chunk: int) -> None:
    path = write_tiny_gguf(tmp_path / "h.gguf")
    assert sha256_file(path, chunk_size=chunk) == hashlib.sha256(path.read_bytes()).hexdigest()
