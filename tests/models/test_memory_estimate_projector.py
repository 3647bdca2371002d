"""The fit estimate counts a vision model's projector: its weights and its image-encoding compute
buffer, in RAM on the CPU and on the GPU with the layers; and the catalog's vision models carry
their projector files, counted in their fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.catalog import CATALOG_FILE, CatalogError, load_catalog, machine_fit
from models.gguf_validate import read_gguf_header
from models.load_estimate import estimate_load
from models.memory_estimate import estimate_memory
from models.memory_records import MachineMemory
from models.projector import CPU_SHARE_WITH_GPU, ProjectorCost, projector_cost
from tests.support.tiny_vision import write_tiny_vision

GB = 10**9
ROOMY = MachineMemory(total_ram=64 * GB, available_ram=60 * GB, vram_total=24 * GB, vram_free=24 * GB)
BIG = ProjectorCost(weights=800_000_000, compute=120_000_000, positions=4096)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path_factory.mktemp("vision"))


def test_on_the_cpu_the_projector_is_weights_and_compute_in_ram(pair: tuple[Path, Path]) -> None:
    header = read_gguf_header(pair[0])
    text = estimate_memory(header, None, 2048, machine=ROOMY)
    seen = estimate_memory(header, None, 2048, machine=ROOMY, projector=BIG)
    assert seen.weights_ram - text.weights_ram == BIG.weights
    assert seen.compute_ram - text.compute_ram == BIG.compute
    assert seen.total_ram - text.total_ram == BIG.weights + BIG.compute
    assert seen.loaded_ram - text.loaded_ram == BIG.weights + BIG.compute  # reserved at load, before any image
    assert (seen.weights_vram, seen.total_vram) == (0, 0)


def test_with_gpu_layers_the_projector_goes_to_the_gpu(pair: tuple[Path, Path]) -> None:
    header = read_gguf_header(pair[0])
    text = estimate_memory(header, None, 2048, n_gpu_layers=-1, machine=ROOMY)
    seen = estimate_memory(header, None, 2048, n_gpu_layers=-1, machine=ROOMY, projector=BIG)
    assert seen.weights_vram - text.weights_vram == BIG.weights
    assert seen.compute_vram - text.compute_vram == BIG.compute
    assert seen.total_vram - text.total_vram == BIG.weights + BIG.compute
    assert seen.total_ram - text.total_ram == int(BIG.compute * CPU_SHARE_WITH_GPU)


def test_the_load_estimate_counts_the_real_projector(pair: tuple[Path, Path]) -> None:
    header = read_gguf_header(pair[0])
    cost = projector_cost(read_gguf_header(pair[1]))
    text = estimate_load(header, None, 2048, ROOMY, gpu_layers=0)
    seen = estimate_load(header, None, 2048, ROOMY, gpu_layers=0, projector=cost)
    assert seen.estimate.total_ram - text.estimate.total_ram == cost.weights + cost.compute > pair[1].stat().st_size
    assert seen.kv_f16 == text.kv_f16


def test_the_catalogs_vision_models_and_their_projectors() -> None:
    catalog = {e.repo_id: e for e in load_catalog()}
    expected = {
        "ggml-org/gemma-3-4b-it-GGUF": ("gemma-3-4b-it-Q4_K_M.gguf", "mmproj-model-f16.gguf"),
        "ggml-org/Qwen2.5-VL-3B-Instruct-GGUF": ("Qwen2.5-VL-3B-Instruct-Q4_K_M.gguf", "mmproj-Qwen2.5-VL-3B-Instruct-f16.gguf"),
        "ggml-org/SmolVLM-500M-Instruct-GGUF": ("SmolVLM-500M-Instruct-Q8_0.gguf", "mmproj-SmolVLM-500M-Instruct-Q8_0.gguf"),
    }
    for repo, (model, mmproj) in expected.items():
        entry = catalog[repo]
        assert (entry.filename, entry.mmproj, entry.vision) == (model, mmproj, True)
        assert entry.mmproj_size_bytes > 0 and entry.projector_bytes() > entry.mmproj_size_bytes
        text_only = entry.size_bytes + entry.kv_cache_bytes(4096)
        assert entry.memory_needed(4096) - entry.projector_bytes() > text_only
        assert entry.matches("vision")
    text = catalog["Qwen/Qwen2.5-0.5B-Instruct-GGUF"]
    assert not text.vision and text.projector_bytes() == 0 and not text.matches("vision")
    qwen_vl = catalog["ggml-org/Qwen2.5-VL-3B-Instruct-GGUF"]
    need = qwen_vl.memory_needed(4096)  # the projector can tip the answer
    assert machine_fit(qwen_vl, int((need - qwen_vl.projector_bytes()) / 0.69)) != "fits"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"mmproj": "projector.bin"}, "not a projector file name"),
        ({"mmproj": "mmproj-x.gguf", "mmproj_size_bytes": 0}, "positive int"),
        ({"mmproj": "mmproj-x.gguf"}, "positive int"),
        ({"mmproj_size_bytes": 5}, 'no "mmproj"'),
    ],
)
def test_a_bad_projector_in_the_catalog_is_one_sentence(tmp_path: Path, change: dict, words: str) -> None:
    data = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    first = {k: v for k, v in data["models"][0].items() if k not in ("mmproj", "mmproj_size_bytes")}
    data["models"][0] = {**first, **change}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert words in str(err.value) and "\n" not in str(err.value) and str(err.value).endswith(".")
