"""Vision projectors: told from models by their header (one sentence otherwise), their memory cost,
pairing on the Hub (one mmproj goes with every quant beside or below it), and placing a downloaded
pair in the models folder."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from models.download.place import destinations
from models.download.register import projector_index
from models.gguf_errors import InvalidModelFile
from models.gguf_validate import read_gguf_header
from models.hub_files import RemoteFile, group_gguf_files
from models.projector import (
    COMPUTE_WITHOUT_HEADER,
    DYNAMIC_WARMUP_POSITIONS,
    cost_from_size,
    is_projector_name,
    preferred_projector,
    projector_cost,
    read_projector_header,
    refuse_projector_as_model,
)
from tests.support.tiny_vision import N_IMAGE_TOKENS, V_EMBD, V_FF, write_tiny_vision

MiB = 1 << 20


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path_factory.mktemp("vision"))


def test_a_projector_is_read_and_a_model_is_not_one(pair: tuple[Path, Path]) -> None:
    text, mmproj = pair
    assert read_projector_header(mmproj).metadata["general.architecture"] == "clip"
    with pytest.raises(InvalidModelFile) as err:
        read_projector_header(text)
    assert str(err.value) == "text_model.gguf is not a projector: it holds a llama model"
    with pytest.raises(InvalidModelFile) as err:
        refuse_projector_as_model(read_gguf_header(mmproj), mmproj)
    assert "mmproj.gguf is a vision projector, not a model" in str(err.value) and "--mmproj mmproj.gguf" in str(err.value)
    refuse_projector_as_model(read_gguf_header(text), text)  # a model passes


def test_an_audio_only_projector_is_refused(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    header = read_gguf_header(pair[1])
    audio = replace(header, metadata={**header.metadata, "clip.has_vision_encoder": False})
    monkeypatch.setattr("models.gguf_validate.read_gguf_header", lambda _path: audio)
    with pytest.raises(InvalidModelFile, match="without a vision encoder"):
        read_projector_header(pair[1])


def test_the_tiny_projectors_cost(pair: tuple[Path, Path]) -> None:
    header = read_gguf_header(pair[1])
    cost = projector_cost(header)
    assert cost.weights == pair[1].stat().st_size
    assert cost.positions == N_IMAGE_TOKENS
    assert cost.compute == N_IMAGE_TOKENS * 4 * (V_FF + 3 * V_EMBD)


def test_the_compute_estimate_meets_a_published_warm_up(pair: tuple[Path, Path]) -> None:
    """A Qwen3-VL projector (n_embd 1152, n_ff 4304, patch 16) logged 248.10 MiB of CUDA compute buffer
    for its 1472 x 1472 warm-up; the estimate is within 3 % of it, and a fixed-size SigLIP at 896 px
    (Gemma 3) sizes for its 4,096 patches."""
    header = read_gguf_header(pair[1])
    vision = {"clip.vision.embedding_length": 1152, "clip.vision.feed_forward_length": 4304}
    qwen = replace(
        header,
        metadata={
            **header.metadata,
            **vision,
            "clip.vision.patch_size": 16,
            "clip.vision.image_size": 768,
            "clip.projector_type": "qwen3vl_merger",
        },
    )
    cost = projector_cost(qwen)
    assert cost.positions == DYNAMIC_WARMUP_POSITIONS
    assert abs(cost.compute / MiB - 248.10) / 248.10 < 0.03
    gemma = replace(
        header,
        metadata={
            **header.metadata,
            **vision,
            "clip.vision.patch_size": 14,
            "clip.vision.image_size": 896,
            "clip.projector_type": "gemma3",
        },
    )
    assert projector_cost(gemma).positions == 64 * 64
    assert projector_cost(gemma).compute == pytest.approx(COMPUTE_WITHOUT_HEADER, rel=0.05)
    assert cost_from_size(1000).compute == COMPUTE_WITHOUT_HEADER and cost_from_size(1000).weights == 1000


def test_names_and_the_preferred_precision() -> None:
    assert is_projector_name("sub/mmproj-model-f16.gguf") and is_projector_name("MMPROJ-F32.gguf")
    assert not is_projector_name("gemma-3-4b-it-Q4_K_M.gguf")
    assert preferred_projector(["mmproj-F32.gguf", "mmproj-BF16.gguf", "mmproj-F16.gguf"]) == "mmproj-F16.gguf"
    assert preferred_projector(["mmproj-F32.gguf", "mmproj-Q8_0.gguf"]) == "mmproj-Q8_0.gguf"
    assert preferred_projector([]) is None


def test_one_mmproj_pairs_with_every_quant_and_is_no_model_of_its_own() -> None:
    files = [
        RemoteFile("model-Q4_K_M.gguf", 100, "a" * 64),
        RemoteFile("model-Q8_0.gguf", 200, "b" * 64),
        RemoteFile("mmproj-model-f16.gguf", 50, "c" * 64),
        RemoteFile("mmproj-model-f32.gguf", 90, "d" * 64),
        RemoteFile("Q2_K/model-Q2_K-00001-of-00002.gguf", 30, "e" * 64),
        RemoteFile("Q2_K/model-Q2_K-00002-of-00002.gguf", 30, "f" * 64),
    ]
    entries = {e.name: e for e in group_gguf_files(files)}
    assert set(entries) == {"model-Q4_K_M.gguf", "model-Q8_0.gguf", "Q2_K/model-Q2_K.gguf"}
    for entry in entries.values():
        assert entry.vision and entry.projector is not None and entry.projector.filename == "mmproj-model-f16.gguf"
    q4 = entries["model-Q4_K_M.gguf"]
    assert q4.filenames == ("model-Q4_K_M.gguf", "mmproj-model-f16.gguf")
    assert (q4.total_size, q4.download_size) == (100, 150)
    split = entries["Q2_K/model-Q2_K.gguf"]
    assert split.filenames[-1] == "mmproj-model-f16.gguf" and len(split.filenames) == 3


def test_a_projector_in_a_folder_pairs_only_below_it_and_text_repos_have_none() -> None:
    files = [RemoteFile("a/x-Q4_K_M.gguf", 10, None), RemoteFile("a/mmproj-x-f16.gguf", 5, None), RemoteFile("y-Q4_K_M.gguf", 10, None)]
    entries = {e.name: e for e in group_gguf_files(files)}
    assert entries["a/x-Q4_K_M.gguf"].projector is not None
    assert entries["y-Q4_K_M.gguf"].projector is None and not entries["y-Q4_K_M.gguf"].vision
    assert entries["y-Q4_K_M.gguf"].filenames == ("y-Q4_K_M.gguf",)


def test_a_downloaded_projector_goes_beside_its_model_never_over_another_file(tmp_path: Path) -> None:
    names = ["sub/model-Q4_K_M.gguf", "sub/mmproj-model-f16.gguf"]
    sizes, shas = [3, 4], [hashlib.sha256(b"abc").hexdigest(), hashlib.sha256(b"abcd").hexdigest()]
    assert destinations(tmp_path, names, sizes, shas) == [tmp_path / "model-Q4_K_M.gguf", tmp_path / "mmproj-model-f16.gguf"]
    (tmp_path / "mmproj-model-f16.gguf").write_bytes(b"another repo's projector")
    assert destinations(tmp_path, names, sizes, shas)[1] == tmp_path / "mmproj-model-f16-2.gguf"
    (tmp_path / "mmproj-model-f16.gguf").write_bytes(b"abcd")  # the same bytes: used again
    assert destinations(tmp_path, names, sizes, shas)[1] == tmp_path / "mmproj-model-f16.gguf"


def test_where_a_downloads_projector_is() -> None:
    assert projector_index(("m-Q4_K_M.gguf", "mmproj-f16.gguf")) == 1
    assert projector_index(("mmproj-f16.gguf",)) == 0
    assert projector_index(("m-00001-of-00002.gguf", "m-00002-of-00002.gguf")) is None
