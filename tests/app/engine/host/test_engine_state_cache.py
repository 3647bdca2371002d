"""The host's RAM cache of earlier conversations' KV state (app/engine/host/state_cache.py): its
bookkeeping, and on the real engine: a conversation taken up again after another one reuses its
restored state, says so, and continues exactly as if nothing had come between."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.engine.client import EngineClient, FinishedEvent
from app.engine.host.state_cache import SavedState, StateCache, worth_restoring
from app.engine.host.transcript import Transcript
from app.engine.request import ReplyRequest, Sampling
from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(60)

T = 1  # one thread (see test_engine_host.py)
KEYS = {
    "enabled",
    "hit",
    "restored_tokens",
    "entries",
    "bytes",
    "restore_ms",
    "save_ms",
    "disk",
    "disk_hit",
    "disk_read_ms",
    "disk_bytes",
    "disk_files",
    "disk_write_ms",
}


# ---- bookkeeping (no engine) -----------------------------------------------------------------


def state(tokens: list[int], size: int, conversation: str | None = None) -> SavedState:
    arr = np.array(tokens, dtype=np.intc)
    transcript = Transcript(conversation, "text", tuple(tokens)) if conversation else None
    return SavedState(arr, np.zeros(size, dtype=np.uint8), transcript)


def test_the_least_recently_used_go_first_when_the_bytes_run_out() -> None:
    cache = StateCache(max_bytes=1000)
    a, b, c = state([1, 2, 3], 400), state([1, 5, 6], 400), state([1, 7, 8], 400)
    assert cache.add(a) and cache.add(b)
    cache.touch(a)  # a is now the most recently used
    assert cache.add(c)
    assert cache.states() == [a, c] and cache.bytes == 800
    assert not cache.add(state([9], 1001)) and len(cache) == 2  # larger than the whole cache: not kept


def test_the_entry_count_is_bounded_too() -> None:
    cache = StateCache(max_bytes=10**9, max_entries=3)
    states = [state([1, 100 + i], 10) for i in range(5)]
    for s in states:
        cache.add(s)
    assert cache.states() == states[2:] and cache.bytes == 30


def test_a_state_replaces_the_states_it_extends_and_best_finds_the_longest_prefix() -> None:
    cache = StateCache(max_bytes=10**6)
    short = state([1, 2, 3], 10, "a")
    cache.add(short)
    cache.add(state([1, 9], 10, "b"))
    longer = state([1, 2, 3, 4, 5], 20, "a")
    cache.add(longer)
    assert short not in cache.states() and len(cache) == 2 and cache.bytes == 30
    assert cache.best([1, 2, 3, 4, 7]) == (longer, 4)
    assert cache.best([1, 9, 9])[1] == 2 and cache.best([5])[0] is None
    assert cache.covered(np.array([1, 2, 3], dtype=np.intc)) is longer
    found = cache.transcript_for("a")
    assert found is not None and found.tokens == (1, 2, 3, 4, 5)
    assert cache.transcript_for("zzz") is None and cache.transcript_for(None) is None


def test_a_restore_must_save_enough_evaluation() -> None:
    assert not worth_restoring(3, 10)  # too few tokens saved to bother
    assert worth_restoring(100, 1000)
    assert not worth_restoring(10, 4000)  # copies 4000 tokens' cells to save 10


# ---- the real engine -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-chat.gguf", chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS)


@pytest.fixture
def engine(chat_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(chat_gguf, n_threads=T)
        yield client


def turn(client: EngineClient, history: list[dict], conversation: str | None, **kw: object) -> FinishedEvent:
    fin = client.generate(
        ReplyRequest.chat(
            history, sampling=Sampling(max_tokens=16, seed=4, temperature=0.0), conversation_id=conversation, ignore_eos=True, **kw
        )
    ).wait()
    assert fin.status == "length", fin.error
    return fin


def garden(client: EngineClient, conversation: str | None, between: bool) -> tuple[FinishedEvent, FinishedEvent, list[dict]]:
    """Conversation A's two turns, perhaps conversation B, then A's third turn: (A2, A3, A3's messages)."""
    a = [{"role": "system", "content": "You answer questions about gardens."}, {"role": "user", "content": "what grows in shade?"}]
    one = turn(client, a, conversation)
    a += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "and in sun?"}]
    two = turn(client, a, conversation)
    a += [{"role": "assistant", "content": two.text}, {"role": "user", "content": "thanks, anything else?"}]
    if between:
        other = turn(client, [{"role": "user", "content": "zz an unrelated topic entirely"}], "B" if conversation else None)
        assert other.metrics["cached_tokens"] < 5 and not other.metrics["state_cache"]["hit"]
    return two, turn(client, a, conversation), a


@pytest.mark.parametrize("conversation", ["A", None], ids=["with-transcript", "text-only"])
def test_a_conversation_taken_up_again_restores_its_state_and_continues_exactly(
    chat_gguf: Path, engine: EngineClient, conversation: str | None
) -> None:
    two, three, history = garden(engine, conversation, between=True)
    m = three.metrics
    assert set(m["state_cache"]) == KEYS
    sc = m["state_cache"]
    assert sc["enabled"] and sc["hit"] and sc["restored_tokens"] == m["cached_tokens"]
    assert not sc["disk"] and not sc["disk_hit"]  # no state folder: RAM only
    assert m["cached_tokens"] >= two.metrics["prompt_tokens"]
    assert sc["entries"] >= 2 and sc["bytes"] > 0 and sc["restore_ms"] > 0 and sc["save_ms"] > 0
    assert three.started is not None and three.started.cached_tokens == m["cached_tokens"]
    # The same turns with nothing between them: the live KV cache is reused, the same tokens are
    # evaluated on the same cells, so a correctly restored state gives the very same reply.
    with EngineClient() as plain:
        plain.load(chat_gguf, n_threads=T)
        _, live, _ = garden(plain, conversation, between=False)
    assert not live.metrics["state_cache"]["hit"] and live.metrics["cached_tokens"] == m["cached_tokens"]
    assert live.text == three.text and len(three.text) > 5
    if conversation is None:
        # Prompts tokenized from their text alone: a fresh host with no cache at all agrees too.
        with EngineClient() as fresh:
            fresh.load(chat_gguf, n_threads=T)
            cold = turn(fresh, history, None, no_cache=True)
        assert cold.metrics["cached_tokens"] == 0 and cold.text == three.text


def test_no_cache_requests_neither_restore_nor_save(engine: EngineClient) -> None:
    first = turn(engine, [{"role": "user", "content": "one two three four five six"}], "x", no_cache=True)
    assert first.metrics["state_cache"]["entries"] == 0
    again = turn(engine, [{"role": "user", "content": "seven eight"}], "y")
    assert again.metrics["state_cache"]["entries"] == 0  # the no_cache reply was not kept


def test_a_zero_sized_cache_is_off(chat_gguf: Path) -> None:
    with EngineClient() as client:
        client.load(chat_gguf, n_threads=T, state_cache_mb=0)
        two, three, _ = garden(client, "A", between=True)
    sc = three.metrics["state_cache"]
    assert sc == {
        "enabled": False,
        "hit": False,
        "restored_tokens": 0,
        "entries": 0,
        "bytes": 0,
        "restore_ms": 0.0,
        "save_ms": 0.0,
        "disk": False,
        "disk_hit": False,
        "disk_read_ms": 0.0,
        "disk_bytes": 0,
        "disk_files": 0,
        "disk_write_ms": 0.0,
    }
    assert three.metrics["cached_tokens"] < 5 < two.metrics["prompt_tokens"]  # B's cells replaced A's


def test_the_oldest_conversation_is_evicted_when_the_bytes_run_out(chat_gguf: Path) -> None:
    """About 450 tokens of this model's KV cells take ~240 kB, so 1 MiB holds four such conversations."""

    def ask(client: EngineClient, i: int, follow_up: bool = False) -> FinishedEvent:
        history = [{"role": "user", "content": f"{'abcdefghij'[i]}{i} topic " + "ab " * 190}]
        if follow_up:
            history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
        fin = client.generate(
            ReplyRequest.chat(history, sampling=Sampling(max_tokens=4, seed=1), conversation_id=f"c{i}", ignore_eos=True)
        ).wait()
        assert fin.status == "length", fin.error
        return fin

    with EngineClient() as client:
        client.load(chat_gguf, n_threads=T, state_cache_mb=1)
        firsts = [ask(client, i) for i in range(6)]
        assert firsts[0].metrics["prompt_tokens"] > 400
        sc = ask(client, 5, follow_up=True).metrics["state_cache"]  # the live one: no restore needed
        assert not sc["hit"] and 2 <= sc["entries"] < 6 and sc["bytes"] <= 1024 * 1024
        per_entry = sc["bytes"] / sc["entries"]
        assert per_entry > 1024 * 1024 / 6  # so six could not all be kept
        oldest = ask(client, 0, follow_up=True)
        assert not oldest.metrics["state_cache"]["hit"] and oldest.metrics["cached_tokens"] < 10
        recent = ask(client, 4, follow_up=True)
        assert recent.metrics["state_cache"]["hit"] and recent.metrics["cached_tokens"] > 400
