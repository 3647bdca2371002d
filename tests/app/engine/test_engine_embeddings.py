"""Embeddings on the real engine: the tiny model written with a pooling type, one unit vector per
text, between replies, and the chat's cached prefix left as it was."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import protocol as p
from app.engine.client import Embeddings, EngineClient, EngineError
from app.engine.request import ReplyRequest, Sampling
from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.tiny_model import N_EMBD, write_tiny_gguf

pytestmark = pytest.mark.timeout(60)

T = 1  # one thread (see test_engine_host.py)


@pytest.fixture(scope="module")
def pooled_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(
        tmp_path_factory.mktemp("models") / "tiny-embed.gguf", pooling_type=1, chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS
    )


@pytest.fixture(scope="module")
def engine(pooled_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        loaded = client.load(pooled_gguf, n_threads=T)
        assert loaded.embeddings is True
        yield client


def host_embed(model: Path, req: p.Embed) -> p.Embedded | p.Failed:
    """What the engine host answers to `req` with `model` loaded (its session, in this process)."""
    from app.engine.host.session import ModelSession

    session = ModelSession(p.Load("l", str(model), n_threads=T))
    try:
        return session.embed(req)
    finally:
        session.close()


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm(a) * norm(b))


def test_one_unit_vector_of_n_embd_floats_per_text(engine: EngineClient) -> None:
    texts = ["the cat sat on the mat", "quarterly revenue rose", "the cat sat on the mat", "x"]
    out = engine.embed(texts)
    assert isinstance(out, Embeddings) and len(out.vectors) == 4
    for v in out.vectors:
        assert len(v) == N_EMBD and all(isinstance(x, float) for x in v)
        assert abs(norm(v) - 1.0) < 1e-6
    assert out.vectors[0] == pytest.approx(out.vectors[2], abs=1e-6)  # same text, same vector
    assert cosine(out.vectors[0], out.vectors[1]) < 0.9
    assert out.prompt_tokens > len("the cat sat on the mat") // 2
    # The same text alone (its own batch) gives the same vector as in a batch of four (to float
    # rounding: the batch's shape changes the order of the sums).
    alone = engine.embed(["quarterly revenue rose"])
    assert cosine(alone.vectors[0], out.vectors[1]) > 0.99999
    assert alone.prompt_tokens < out.prompt_tokens


def test_many_texts_span_several_batches_in_order(engine: EngineClient) -> None:
    texts = [f"item number {i} " * (1 + i % 7) for i in range(80)]  # more than one decode's sequences
    out = engine.embed(texts)
    assert len(out.vectors) == 80
    again = engine.embed([texts[57], texts[3]])
    assert cosine(again.vectors[0], out.vectors[57]) > 0.99999 and cosine(again.vectors[1], out.vectors[3]) > 0.99999
    assert cosine(out.vectors[57], out.vectors[3]) < 0.99


def two_turns(client: EngineClient, between: list[str] | None) -> tuple[dict, dict, str]:
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    one = client.generate(
        ReplyRequest.chat(history, sampling=Sampling(max_tokens=12, seed=2, temperature=0.0), conversation_id="e1", ignore_eos=True)
    ).wait()
    assert one.status == "length", one.error
    if between is not None:
        assert len(client.embed(between).vectors) == len(between)
    history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "again"}]
    two = client.generate(
        ReplyRequest.chat(history, sampling=Sampling(max_tokens=12, seed=2, temperature=0.0), conversation_id="e1", ignore_eos=True)
    ).wait()
    return one.metrics, two.metrics, two.text


def test_an_embed_between_replies_leaves_the_chat_cache_as_it_was(pooled_gguf: Path) -> None:
    with EngineClient() as client:
        client.load(pooled_gguf, n_threads=T)
        one, two, text = two_turns(client, ["something else entirely " * 20, "and more"])
    assert two["cached_tokens"] == one["context_used"]  # the whole transcript is reused
    # ... and what it continues from is intact: a host that embedded nothing says the same.
    with EngineClient() as client:
        client.load(pooled_gguf, n_threads=T)
        _, plain_two, plain_text = two_turns(client, None)
    assert plain_two["cached_tokens"] == two["cached_tokens"] and plain_text == text and len(text) > 3


def test_long_and_empty_texts_are_sentences(engine: EngineClient, pooled_gguf: Path) -> None:
    loaded = engine.loaded
    assert loaded is not None
    with pytest.raises(EngineError, match=r"text 2 is \d+ tokens; tiny-embed.gguf embeds at most 512 at a time"):
        engine.embed(["fine", "word " * 2000])
    with pytest.raises(EngineError, match="there is no text to embed"):
        engine.embed([])
    assert len(engine.embed(["still works"]).vectors) == 1


def test_embed_while_a_reply_is_generated_is_refused(engine: EngineClient) -> None:
    gen = engine.generate(ReplyRequest.chat([{"role": "user", "content": "go on"}], sampling=Sampling(max_tokens=100_000), ignore_eos=True))
    try:
        with pytest.raises(EngineError, match="a reply is still being generated"):
            engine.embed(["x"])
    finally:
        gen.cancel()
        gen.wait(30)
    assert len(engine.embed(["x"]).vectors) == 1


def test_a_model_without_pooling_is_not_an_embedding_model(tiny_gguf: Path) -> None:
    with EngineClient() as client:
        loaded = client.load(tiny_gguf, n_threads=T)
        assert loaded.embeddings is False
        with pytest.raises(EngineError) as info:
            client.embed(["hello"])
        assert str(info.value) == "tiny-llama.gguf is not an embedding model: its file declares no pooling type"
    # The host's session says the same when asked directly (a client that skips the check).
    reply = host_embed(tiny_gguf, p.Embed("e-direct", ["hello"]))
    assert isinstance(reply, p.Failed) and reply.kind == "embed" and "declares no pooling type" in reply.message
    with EngineClient() as client, pytest.raises(EngineError, match="no model is loaded"):
        client.embed(["hello"])


def test_a_reranker_is_named_as_one(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny-rank.gguf", pooling_type=4)
    with EngineClient() as client:
        assert client.load(path, n_threads=T).embeddings is False
    reply = host_embed(path, p.Embed("e-rank", ["hello"]))
    assert isinstance(reply, p.Failed) and "reranking model" in reply.message


def test_the_host_restarts_for_an_embed_after_a_crash(pooled_gguf: Path) -> None:
    with EngineClient() as client:
        client.load(pooled_gguf, n_threads=T)
        first = client.embed(["hello world"]).vectors[0]
        pid = client.host_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # a crash: the host killed from outside
        deadline = time.monotonic() + 10
        while client.host_pid == pid and time.monotonic() < deadline:  # until the client sees it gone
            time.sleep(0.01)
        assert client.host_pid is None
        again = client.embed(["hello world"]).vectors[0]
        assert client.host_pid not in (None, pid)
        assert again == pytest.approx(first, abs=1e-6)
