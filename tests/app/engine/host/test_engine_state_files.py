"""Saved KV state on disk through the real engine (tiny model): a conversation continued in a new
engine host (a restart) restores its file and evaluates only the new tokens, with the same reply as
recomputing; a file of another model, context size or KV type is not used; a damaged file is
ignored and replaced; the limit evicts; a write that fails costs the reply nothing."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.client import EngineClient, FinishedEvent
from app.engine.host.state_files import SUFFIX, read_meta
from app.engine.request import ReplyRequest, Sampling
from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(120)

T = 1  # one thread (see test_engine_host.py)


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-chat.gguf", chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS)


@pytest.fixture(scope="module")
def wide_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Heads of 32 values, which a quantized K cache needs."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("models") / "tiny-wide.gguf", chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS, n_head=2
    )


@contextmanager
def engine(model: Path, state_dir: Path | None, mb: int = 64, host_argv: list[str] | None = None, **load: Any) -> Iterator[EngineClient]:
    """A fresh engine host (closing it is the restart: the host finishes its queued writes)."""
    with EngineClient(state_dir=state_dir, state_disk_mb=mb, host_argv=host_argv) as client:
        client.load(model, n_threads=T, **load)
        yield client


def turn(client: EngineClient, history: list[dict[str, str]], conversation: str | None, **kw: Any) -> FinishedEvent:
    # No drafting: its verify batches would count as prompt evaluation in llama_n_p_eval.
    fin = client.generate(
        ReplyRequest.chat(
            history,
            sampling=Sampling(max_tokens=16, seed=4, temperature=0.0),
            conversation_id=conversation,
            ignore_eos=True,
            speculative="off",
            **kw,
        )
    ).wait()
    assert fin.status == "length", fin.error
    return fin


FIRST = [
    {"role": "system", "content": "You answer questions about gardens."},
    {"role": "user", "content": "what grows in shade? " + "ferns and hostas and moss " * 8},
]


def follow_up(one: FinishedEvent) -> list[dict[str, str]]:
    return [*FIRST, {"role": "assistant", "content": one.text}, {"role": "user", "content": "and in full sun?"}]


def state_files_in(root: Path) -> list[Path]:
    return sorted(root.rglob(f"*{SUFFIX}"))


def test_a_conversation_continued_after_a_restart_evaluates_only_the_new_tokens(chat_gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    with engine(chat_gguf, states) as client:
        one = turn(client, FIRST, "c1")
        assert not one.metrics["state_cache"]["disk_hit"] and one.metrics["state_cache"]["disk"]
    [path] = state_files_in(states)
    assert path.parent.name == "c1"
    saved, size = read_meta(path, path.stem), path.stat().st_size
    assert len(saved.tokens) == one.metrics["prompt_tokens"] + one.metrics["gen_tokens"] - 1  # the last token is never evaluated
    assert saved.transcript is not None and saved.transcript.conversation_id == "c1"

    with engine(chat_gguf, states) as client:  # the restart
        two = turn(client, follow_up(one), "c1")
    m, sc = two.metrics, two.metrics["state_cache"]
    assert sc["disk_hit"] and sc["hit"] and sc["restored_tokens"] == m["cached_tokens"]
    assert one.metrics["prompt_tokens"] < m["cached_tokens"] <= len(saved.tokens)  # prompt and reply
    assert m["llama_n_p_eval"] == m["prompt_tokens"] - m["cached_tokens"] < 40  # only the new message
    assert sc["disk_read_ms"] > 0 and sc["disk_files"] == 1 and sc["disk_bytes"] == size
    assert two.started is not None and two.started.cached_tokens == m["cached_tokens"]

    # The same two turns in one engine that never stopped: the same cells reused, the same reply.
    with engine(chat_gguf, None) as client:
        live_one = turn(client, FIRST, "c1")
        live_two = turn(client, follow_up(live_one), "c1")
    assert live_one.text == one.text
    assert live_two.metrics["cached_tokens"] == m["cached_tokens"] and live_two.text == two.text and len(two.text) > 5
    assert live_two.metrics["llama_n_p_eval"] == m["llama_n_p_eval"]
    # The next save replaced the file with the longer state.
    longer = read_meta(path, path.stem)
    assert len(longer.tokens) > len(saved.tokens)


def test_a_restored_state_gives_the_same_reply_as_recomputing_the_prompt(chat_gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    base = [int(t) for t in np.random.default_rng(5).integers(300, 900, 160)]
    follow = base + [int(t) for t in np.random.default_rng(6).integers(300, 900, 24)]
    with engine(chat_gguf, states) as client:
        client.generate(
            ReplyRequest.chat(
                [],
                sampling=Sampling(max_tokens=8, temperature=0.0),
                conversation_id="p1",
                prompt_tokens=base,
                ignore_eos=True,
                speculative="off",
            )
        ).wait()
    with engine(chat_gguf, states) as client:
        restored = client.generate(
            ReplyRequest.chat(
                [],
                sampling=Sampling(max_tokens=12, temperature=0.0),
                conversation_id="p1",
                prompt_tokens=follow,
                ignore_eos=True,
                speculative="off",
            )
        ).wait()
    with engine(chat_gguf, None) as client:
        recomputed = client.generate(
            ReplyRequest.chat(
                [],
                sampling=Sampling(max_tokens=12, temperature=0.0),
                prompt_tokens=follow,
                ignore_eos=True,
                no_cache=True,
                speculative="off",
            )
        ).wait()
    assert restored.metrics["state_cache"]["disk_hit"] and restored.metrics["cached_tokens"] == len(base)
    assert restored.metrics["llama_n_p_eval"] == 24
    assert recomputed.metrics["cached_tokens"] == 0 and recomputed.metrics["llama_n_p_eval"] == len(follow)
    assert restored.text == recomputed.text and restored.metrics["gen_tokens"] == 12


MISMATCHES = {
    "another-model-file": ({}, True),
    "another-n_ctx": ({"n_ctx": 256}, False),
    "another-k-type": ({"type_k": "q8_0"}, False),
    "another-flash-attention": ({"flash_attn": False}, False),
}


@pytest.mark.parametrize("name", list(MISMATCHES))
def test_a_state_saved_by_another_setup_is_not_used(wide_gguf: Path, tmp_path: Path, name: str) -> None:
    load, other_file = MISMATCHES[name]
    states = tmp_path / "states"
    with engine(wide_gguf, states) as client:
        one = turn(client, FIRST, "c1")
    [first] = state_files_in(states)
    model = wide_gguf
    if other_file:  # the very same bytes under another name: another file as far as the key goes
        model = tmp_path / "copy.gguf"
        shutil.copyfile(wide_gguf, model)
    with engine(model, states, **load) as client:
        two = turn(client, follow_up(one), "c1")
    sc = two.metrics["state_cache"]
    assert not sc["disk_hit"] and not sc["hit"] and two.metrics["cached_tokens"] == 0
    assert first.exists()  # left for the setup it belongs to
    assert len(state_files_in(states)) == 2  # and this setup saved its own


def truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) * 2 // 3])


def random_bytes(path: Path) -> None:
    path.write_bytes(np.random.default_rng(9).integers(0, 256, path.stat().st_size).astype(np.uint8).tobytes())


def flipped_data(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-500] ^= 0x55
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", [truncate, random_bytes, flipped_data])
def test_a_damaged_state_file_is_ignored_and_the_prompt_recomputed(chat_gguf: Path, tmp_path: Path, damage: Any) -> None:
    states = tmp_path / "states"
    with engine(chat_gguf, states) as client:
        one = turn(client, FIRST, "c1")
    [path] = state_files_in(states)
    damage(path)
    bad = path.read_bytes()
    with engine(chat_gguf, states) as client:
        two = turn(client, follow_up(one), "c1")
    sc = two.metrics["state_cache"]
    assert not sc["disk_hit"] and two.metrics["cached_tokens"] == 0
    # What a host with no saved state at all replies to the same messages.
    with engine(chat_gguf, None) as client:
        fresh = turn(client, follow_up(one), "c1")
    assert fresh.metrics["cached_tokens"] == 0 and two.text == fresh.text
    # The damaged file went; the reply's own state took its place.
    assert path.read_bytes() != bad
    assert len(read_meta(path, path.stem).tokens) > one.metrics["prompt_tokens"]


def test_the_disk_limit_evicts_the_least_recently_used_conversation(chat_gguf: Path, tmp_path: Path) -> None:
    """About 440 tokens of this model's KV cells take ~230 kB, so 1 MiB holds four such files."""
    states = tmp_path / "states"

    def history(i: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{'abcdefghij'[i]}{i} topic " + "ab " * 190}]

    firsts = {}
    with engine(chat_gguf, states, mb=1, state_cache_mb=0) as client:
        for i in range(6):
            firsts[i] = turn(client, history(i), f"c{i}")
    files = state_files_in(states)
    assert 2 <= len(files) < 6 and sum(p.stat().st_size for p in files) <= 1024 * 1024
    assert "c0" not in {p.parent.name for p in files} and "c5" in {p.parent.name for p in files}
    assert not (states / "c0").exists()
    with engine(chat_gguf, states, mb=1) as client:
        newest = turn(client, [*history(5), {"role": "assistant", "content": firsts[5].text}, {"role": "user", "content": "more"}], "c5")
        oldest = turn(client, [*history(0), {"role": "assistant", "content": firsts[0].text}, {"role": "user", "content": "more"}], "c0")
    assert newest.metrics["state_cache"]["disk_hit"] and newest.metrics["cached_tokens"] > 400
    assert not oldest.metrics["state_cache"]["disk_hit"] and oldest.metrics["cached_tokens"] < 10


# A host whose files may not grow past 64 kB: each state write fails part way (EFBIG), as on a full disk.
SMALL_FILES_HOST = [
    sys.executable,
    "-c",
    (
        "import resource, runpy, signal, sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))\n"
        "sys.argv = ['app.engine.host.main', *sys.argv[1:]]\n"
        "runpy.run_module('app.engine.host.main', run_name='__main__', alter_sys=True)\n"
    ),
]


def test_replies_go_on_when_the_state_cannot_be_written(chat_gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    with engine(chat_gguf, states, host_argv=SMALL_FILES_HOST) as client:
        one = turn(client, FIRST, "c1")
        two = turn(client, follow_up(one), "c1")  # the live cache still serves the conversation
        three = turn(client, [{"role": "user", "content": "zz another " * 30}], "c2")
    assert two.metrics["cached_tokens"] > one.metrics["prompt_tokens"] and three.metrics["state_cache"]["disk_files"] == 0
    assert states.is_dir() and state_files_in(states) == [] and list(states.rglob("*.tmp")) == []

    blocker = tmp_path / "a-file"
    blocker.write_text("where the state folder should be")
    with engine(chat_gguf, blocker / "states") as client:
        one = turn(client, FIRST, "c1")
        two = turn(client, follow_up(one), "c1")
    assert two.status == "length" and two.metrics["state_cache"]["disk_files"] == 0


def test_a_conversation_continued_after_a_model_switch_restores_its_file(chat_gguf: Path, wide_gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    with EngineClient(state_dir=states, state_disk_mb=64) as client:  # one host throughout
        client.load(chat_gguf, n_threads=T)
        one = turn(client, FIRST, "c1")
        client.load(wide_gguf, n_threads=T)  # the RAM cache of the first model goes with its load
        other = turn(client, FIRST, "c1")
        assert not other.metrics["state_cache"]["disk_hit"] and other.metrics["cached_tokens"] == 0
        client.load(chat_gguf, n_threads=T)
        two = turn(client, follow_up(one), "c1")
    sc = two.metrics["state_cache"]
    assert sc["disk_hit"] and two.metrics["cached_tokens"] > one.metrics["prompt_tokens"]
    assert len(state_files_in(states)) == 2  # one per model
