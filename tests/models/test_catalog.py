"""The curated catalog: it loads, every entry is consistent (quant = what the file name says), a bad
file is one sentence, and machine_fit gives sensible answers across machine sizes."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import psutil
import pytest

from models.catalog import CATALOG_FILE, FITS, TIGHT, TOO_LARGE, CatalogEntry, CatalogError, load_catalog, machine_fit, machine_ram
from models.quant import quant_from_filename

GiB = 1024**3
ORDER = {FITS: 0, TIGHT: 1, TOO_LARGE: 2}


@pytest.fixture(scope="module")
def catalog() -> list[CatalogEntry]:
    return load_catalog()


def by_name(catalog: list[CatalogEntry], name: str) -> CatalogEntry:
    return next(e for e in catalog if e.name == name)


def test_catalog_spans_small_to_large_instruct_models(catalog: list[CatalogEntry]) -> None:
    assert 10 <= len(catalog) <= 20
    params = [e.parameters for e in catalog]
    assert min(params) < 1e9 and max(params) > 30e9  # ~0.5B ... ~32B
    sizes = [e.size_bytes for e in catalog]
    assert sizes == sorted(sizes)  # smallest first
    assert len({(e.repo_id, e.filename) for e in catalog}) == len(catalog)


def test_every_entry_is_consistent(catalog: list[CatalogEntry]) -> None:
    for e in catalog:
        assert quant_from_filename(e.filename) == e.quant, e.filename
        assert e.filename.endswith(".gguf") and e.repo_id.count("/") == 1
        assert e.name and e.description and e.license
        assert e.n_layer > 0 and e.n_head_kv > 0 and e.head_dim in (64, 96, 128, 256)
        assert e.context_length >= 8192
        # Bits per weight of the recommended file: about 4.5-6 for Q4_K_M/MXFP4; tiny models run
        # higher (their embedding table is a large share and stays at 6-8 bits), so the bound is wide.
        assert 3.5 <= e.size_bytes * 8 / e.parameters <= 8.5, e.name
        assert "size_bytes" in e.approximate


def test_kv_cache_is_f16_k_and_v_per_layer(catalog: list[CatalogEntry]) -> None:
    llama8b = by_name(catalog, "Llama 3.1 8B Instruct")  # 32 layers x 8 KV heads x 128
    assert llama8b.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2
    assert llama8b.kv_cache_bytes(8192) == GiB  # the well-known 1 GiB at 8k context
    assert llama8b.memory_needed(8192) > llama8b.memory_needed(4096) > llama8b.size_bytes


def test_machine_fit_at_a_few_ram_sizes(catalog: list[CatalogEntry]) -> None:
    tiny = by_name(catalog, "Qwen2.5 0.5B Instruct")
    mid = by_name(catalog, "Llama 3.1 8B Instruct")
    big = by_name(catalog, "Qwen2.5 32B Instruct")
    assert machine_fit(tiny, 4 * GiB) == FITS
    assert machine_fit(mid, 4 * GiB) == TOO_LARGE
    assert machine_fit(mid, 8 * GiB) == TIGHT
    assert machine_fit(mid, 16 * GiB) == FITS
    assert machine_fit(big, 16 * GiB) == TOO_LARGE
    assert machine_fit(big, 24 * GiB) == TOO_LARGE
    assert machine_fit(big, 64 * GiB) == FITS
    assert machine_fit(tiny, 0) == TOO_LARGE


def test_more_memory_never_makes_a_model_fit_worse(catalog: list[CatalogEntry]) -> None:
    for e in catalog:
        answers = [ORDER[machine_fit(e, ram * GiB)] for ram in (2, 4, 8, 12, 16, 24, 32, 48, 64, 128)]
        assert answers == sorted(answers, reverse=True), e.name
        assert machine_fit(e, 128 * GiB) == FITS


def test_vram_adds_to_the_budget_and_context_costs_memory(catalog: list[CatalogEntry]) -> None:
    big = by_name(catalog, "Qwen2.5 32B Instruct")
    assert machine_fit(big, 16 * GiB) == TOO_LARGE
    assert machine_fit(big, 16 * GiB, vram_bytes=24 * GiB) == FITS
    phi = by_name(catalog, "Phi-3.5 mini Instruct")  # no grouped-query attention: a big KV cache
    assert machine_fit(phi, 16 * GiB, n_ctx=4096) == FITS
    assert machine_fit(phi, 16 * GiB, n_ctx=131072) == TOO_LARGE


def test_the_rule_thresholds() -> None:
    entry = CatalogEntry(
        name="X",
        repo_id="o/x",
        filename="x-Q4_K_M.gguf",
        quant="Q4_K_M",
        size_bytes=1_000_000_000,
        parameters=2_000_000_000,
        context_length=8192,
        license="mit",
        description="d",
        n_layer=1,
        n_head_kv=1,
        head_dim=64,
    )
    need = entry.memory_needed(0)  # weights + 512 MB + 10%
    assert need == 1_000_000_000 + 512_000_000 + 100_000_000
    assert machine_fit(entry, int(need / 0.69), n_ctx=0) == FITS
    assert machine_fit(entry, int(need / 0.80), n_ctx=0) == TIGHT
    assert machine_fit(entry, int(need / 0.95), n_ctx=0) == TOO_LARGE


def test_machine_ram_is_this_machines_total() -> None:
    assert machine_ram() == psutil.virtual_memory().total > 0


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _good() -> dict:
    return json.loads(CATALOG_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda d: d["models"][0].pop("n_layer"), "'n_layer'"),
        (lambda d: d["models"][0].update(quant="Q8_0"), "file name says Q4_K_M"),
        (lambda d: d["models"][0].update(size_bytes=-5), "must be positive"),
        (lambda d: d["models"][0].update(size_bytes=True), "'size_bytes'"),
        (lambda d: d["models"].append(dict(d["models"][0])), "twice"),
        (lambda d: d["models"][0].update(filename="model.bin"), "not a .gguf file"),
        (lambda d: d["models"][0].update(repo_id="no-owner"), "owner/name"),
        (lambda d: d.update(models=[]), 'no "models" list'),
    ],
)
def test_a_bad_catalog_is_one_sentence(tmp_path: Path, mutate, words: str) -> None:
    data = _good()
    mutate(data)
    with pytest.raises(CatalogError) as err:
        load_catalog(_write(tmp_path, data))
    message = str(err.value)
    assert words in message
    assert "\n" not in message and message.endswith(".")


def test_unreadable_or_missing_catalog_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="could not be read"):
        load_catalog(_write(tmp_path, "{not json"))
    with pytest.raises(CatalogError, match="missing"):
        load_catalog(tmp_path / "nope.json")


def test_entries_are_frozen_and_search_matches_words(catalog: list[CatalogEntry]) -> None:
    e = by_name(catalog, "Qwen2.5 7B Instruct")
    with pytest.raises(FrozenInstanceError):
        e.size_bytes = 1  # type: ignore[misc]
    assert e.matches("qwen 7b") and e.matches("BARTOWSKI") and not e.matches("llama")
    assert replace(e, notes="n").notes == "n"
