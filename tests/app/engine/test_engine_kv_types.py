"""The KV cache types on the real engine (tiny model, heads of 32 values so a quantized K fits
its blocks): a load with each type reports it, llama.cpp's own KV buffer shrinks against f16 and
matches the memory estimate's KV part within 10%, replies still come, and a quantized V with
flash attention off is refused with a sentence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient, EngineError
from app.engine.request import ReplyRequest, Sampling
from app.load_options import LoadOptions
from app.settings import ModelPlacement
from models.gguf_validate import read_gguf_header
from models.memory_estimate import compute_parts
from models.model_facts import facts_from_header
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(120)

N_CTX = 4096


@pytest.fixture(scope="module")
def kv_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-kv.gguf", n_ctx_train=N_CTX, n_head=2)


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


def _estimated_kv(path: Path, type_k: str, type_v: str, flash_attn: bool) -> int:
    e = compute_parts(facts_from_header(read_gguf_header(path)), None, N_CTX, 0, type_k, type_v=type_v, flash_attn=flash_attn)
    return e.kv_ram + e.kv_vram


@pytest.mark.parametrize(
    ("type_k", "type_v", "flash_attn"),
    [
        ("f16", "f16", None),
        ("q8_0", "q8_0", True),
        ("q4_0", "q4_0", True),
        ("q8_0", "f16", False),
        ("f16", "q4_0", None),
    ],
)
def test_each_kv_type_loads_shrinks_the_cache_and_matches_the_estimate(
    engine: EngineClient, kv_gguf: Path, type_k: str, type_v: str, flash_attn: bool | None
) -> None:
    f16 = engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1).kv_bytes
    placement = ModelPlacement(type_k=type_k, type_v=type_v, flash_attn=flash_attn)
    loaded = engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1, **LoadOptions(placement).load_arguments())
    assert (loaded.type_k, loaded.type_v) == (type_k, type_v)
    assert loaded.flash_attn == {None: "auto", True: "on", False: "off"}[flash_attn]
    estimate = _estimated_kv(kv_gguf, type_k, type_v, flash_attn is not False)
    assert loaded.kv_bytes > 0 and abs(loaded.kv_bytes - estimate) <= 0.10 * estimate, (loaded.kv_bytes, estimate)
    if (type_k, type_v) == ("f16", "f16"):
        assert loaded.kv_bytes == f16
    else:
        assert loaded.kv_bytes < f16
    reply = engine.generate(
        ReplyRequest.chat(
            [{"role": "user", "content": "hello there"}],
            sampling=Sampling(max_tokens=6, temperature=0.0),
            speculative=placement.speculative,
        )
    ).wait(60)
    assert reply.status in ("complete", "length") and reply.metrics["gen_tokens"] > 0


def test_a_q4_cache_takes_about_a_quarter_and_q8_about_half(engine: EngineClient, kv_gguf: Path) -> None:
    f16 = engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1).kv_bytes
    q8 = engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1, type_k="q8_0", type_v="q8_0", flash_attn=True).kv_bytes
    q4 = engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1, type_k="q4_0", type_v="q4_0", flash_attn=True).kv_bytes
    assert 0.50 <= q8 / f16 <= 0.56  # 34 bytes per 32 values against 64
    assert 0.26 <= q4 / f16 <= 0.30  # 18 against 64


def test_a_quantized_v_with_flash_attention_off_is_refused_with_a_sentence(engine: EngineClient, kv_gguf: Path) -> None:
    with pytest.raises(EngineError, match="V cache needs flash attention"):
        engine.load(kv_gguf, n_ctx=N_CTX, n_threads=1, type_k="f16", type_v="q8_0", flash_attn=False)
    assert ModelPlacement(type_v="q8_0", flash_attn=False).problem() is not None  # the dialog and CLI refuse it first
