"""llama.cpp's extra weight buffers (AMX, repacked layouts): kept off where the build has AMX (its
batched matrix multiply crashes the engine on such a processor, llama.cpp #20824), forced either
way with COVE_LLAMA_AMX, applied to the model's load parameters, and named in the placement note."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest
from llama_cpp import Llama
from llama_cpp import _internals as llama_internals

from app.engine.client import EngineClient
from app.engine.host import cpu_quirks
from app.engine.host.cpu_quirks import AMX_NOTE, EXTRA_BUFFERS_ENV, OFF_NOTE, extra_buffers
from app.engine.host.llama_open import model_buffers
from app.engine.request import ReplyRequest, Sampling
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(120)

WITH_AMX = b"CPU : SSE3 = 1 | AVX2 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | REPACK = 1 | "
WITHOUT_AMX = b"CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | REPACK = 1 | "


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


@pytest.mark.parametrize(
    ("info", "env", "allowed", "note"),
    [
        (WITH_AMX, None, False, AMX_NOTE),
        (WITHOUT_AMX, None, True, ""),
        (WITH_AMX, "1", True, ""),
        (WITHOUT_AMX, "0", False, OFF_NOTE),
        (WITH_AMX, "yes", False, AMX_NOTE),  # anything but 0 or 1: Cove decides
    ],
)
def test_extra_buffers_are_off_where_the_build_has_amx_unless_told(
    monkeypatch: pytest.MonkeyPatch, info: bytes, env: str | None, allowed: bool, note: str
) -> None:
    monkeypatch.setattr(cpu_quirks.llama_cpp, "llama_print_system_info", lambda: info)
    if env is None:
        monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    else:
        monkeypatch.setenv(EXTRA_BUFFERS_ENV, env)
    assert extra_buffers() == (allowed, note)


def test_the_build_this_suite_runs_on_is_read_from_llama_cpp() -> None:
    info = llama_cpp.llama_print_system_info().decode()
    assert cpu_quirks.amx_in_build() == ("AMX_INT8 = 1" in info)


@pytest.mark.parametrize("allowed", [False, True])
def test_a_model_opened_inside_model_buffers_gets_that_choice_and_the_patch_is_undone(tiny: Path, allowed: bool) -> None:
    before = llama_internals.LlamaModel
    with model_buffers(allowed):
        llm = Llama(model_path=str(tiny), n_ctx=64, n_threads=1, verbose=False)
    try:
        assert llama_internals.LlamaModel is before
        assert bool(llm.model_params.use_extra_bufts) is allowed
        llm.eval(llm.tokenize(b"hello there, a prompt of a few tokens"))  # a batched prompt still reads
        assert llm.n_tokens > 3
    finally:
        llm.close()


def test_the_engine_loads_with_them_off_and_says_so(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "0")
    with EngineClient() as engine:
        loaded = engine.load(tiny, n_ctx=256, n_threads=1)
        assert OFF_NOTE in loaded.placement["note"] and loaded.placement["extra_buffers"] is False
        reply = engine.generate(
            ReplyRequest.chat([{"role": "user", "content": "hello there"}], sampling=Sampling(max_tokens=6, temperature=0.0))
        ).wait()
        assert reply.error is None and reply.metrics["gen_tokens"] > 0
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "1")
    with EngineClient() as engine:
        placement = engine.load(tiny, n_ctx=256, n_threads=1).placement
        assert OFF_NOTE not in placement["note"] and placement["extra_buffers"] is True
