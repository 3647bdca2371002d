"""The real engine: a host process running llama.cpp on the tiny random-weight GGUF."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.client import EngineClient, EngineError, FinishedEvent, TokenEvent
from app.engine.host.session import default_threads
from app.engine.request import ReplyRequest, Sampling
from tests.support.tiny_model import BOS_ID, tiny_vocab, write_tiny_gguf

pytestmark = pytest.mark.timeout(60)

# One thread: on a busy 2-core CI machine, llama.cpp's OpenMP workers wait on each other
# and a 2-thread run can be 100x slower. Defaults are tested once, without generating.
T = 1

METRICS = {
    "prompt_tokens",
    "cached_tokens",
    "prefill_ms",
    "prompt_tps",
    "gen_tokens",
    "gen_ms",
    "gen_tps",
    "stop_reason",
    "n_ctx",
    "context_used",
    "dropped_turns",
    "template_source",
    "ttft_ms",
    "engine_uss_bytes",
    "engine_rss_bytes",
}


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineClient]:
    with EngineClient() as client:
        yield client


def test_load_defaults_and_context_read_back(engine: EngineClient, tiny_gguf: Path) -> None:
    loaded = engine.load(tiny_gguf)
    assert loaded.n_ctx == 512 and loaded.n_ctx_train == 512  # min(training context, 8192)
    assert loaded.n_threads == default_threads()
    assert loaded.backend == "cpu" and loaded.n_gpu_layers == 0
    assert 0 < loaded.n_batch <= loaded.n_ctx and loaded.n_ubatch <= loaded.n_batch
    assert loaded.template_source == "fallback:qa"  # a base model (tests/app/engine/host/test_base_model_format.py)
    assert "no chat template" in loaded.template_note
    assert loaded.architecture == "llama" and loaded.n_vocab > 256 and loaded.load_ms > 0
    pid = engine.host_pid
    assert engine.load(str(tiny_gguf)) is loaded and engine.host_pid == pid  # same model + settings: reused


def test_streams_tokens_that_join_to_the_final_text(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf, n_threads=T)
    gen = engine.generate(ReplyRequest.chat(user("hello there"), sampling=Sampling(max_tokens=24, seed=1), ignore_eos=True))
    events = list(gen)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    fin = events[-1]
    assert isinstance(fin, FinishedEvent) and events.count(fin) == 1
    assert len(tokens) >= 5
    assert "".join(t.text for t in tokens) == fin.text
    assert fin.status == "length" and fin.error is None
    assert set(fin.metrics) >= METRICS, METRICS - set(fin.metrics)
    m = fin.metrics
    assert m["gen_tokens"] == 24 and m["stop_reason"] == "length"
    assert m["prompt_tokens"] > 3 and m["context_used"] == m["prompt_tokens"] + 23  # the last token is not evaluated
    assert m["ttft_ms"] > 0 and m["engine_uss_bytes"] > 0 and m["gen_tps"] > 0
    assert gen.started is not None and fin.started == gen.started and gen.started.prompt_tokens == m["prompt_tokens"]


def test_cancel_mid_stream_keeps_the_partial_text_and_the_next_reply_works(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf, n_threads=T)
    gen = engine.generate(
        ReplyRequest.chat(user("tell me a long story"), sampling=Sampling(max_tokens=100_000), conversation_id="cancel", ignore_eos=True)
    )
    seen = []
    for event in gen:
        if isinstance(event, TokenEvent):
            seen.append(event.text)
            if len(seen) == 5:
                gen.cancel()
    fin = gen.wait()
    assert fin.status == "cancelled" and fin.error is None
    assert fin.text == "".join(seen) and len(fin.text) > 0
    assert fin.metrics["gen_tokens"] < 1000
    again = engine.generate(
        ReplyRequest.chat(user("hi"), sampling=Sampling(max_tokens=5), conversation_id="cancel", ignore_eos=True)
    ).wait()
    assert again.status == "length" and again.metrics["gen_tokens"] == 5


def test_follow_up_turn_reuses_the_exact_transcript(tiny_gguf_with_template: Path) -> None:
    with EngineClient() as engine:
        loaded = engine.load(tiny_gguf_with_template, n_threads=T)
        assert loaded.template_source == "gguf"
        history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
        one = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=20, seed=2), conversation_id="c1")).wait()
        assert one.metrics["template_source"] == "gguf" and one.metrics["cached_tokens"] == 0
        history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "and more"}]
        two = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=20, seed=2), conversation_id="c1")).wait()
        assert two.metrics["cached_tokens"] >= one.metrics["prompt_tokens"]
        # Everything the model saw last turn (prompt + reply tokens) is reused, not re-tokenized.
        assert two.metrics["cached_tokens"] == one.metrics["context_used"]
        assert two.metrics["prompt_tokens"] > two.metrics["cached_tokens"]
        # Another conversation shares only the common start of the prompt.
        other = engine.generate(
            ReplyRequest.chat([history[0], {"role": "user", "content": "zzz"}], sampling=Sampling(max_tokens=3), conversation_id="c2")
        ).wait()
        assert 0 < other.metrics["cached_tokens"] < one.metrics["prompt_tokens"]


def test_a_request_without_a_conversation_reuses_its_previous_reply_exactly(tiny_gguf_with_template: Path) -> None:
    """An API client resends the whole conversation: the next step's prompt starts with the last
    prompt and reply, whose tokens (as sampled, not re-tokenized) are all reused."""
    with EngineClient() as engine:
        engine.load(tiny_gguf_with_template, n_threads=T)
        history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
        one = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=20, seed=3))).wait()
        history += [{"role": "assistant", "content": one.text}, {"role": "user", "content": "and more"}]
        two = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=20, seed=3))).wait()
        assert two.metrics["cached_tokens"] == one.metrics["context_used"]


def test_small_context_is_raised_to_the_minimum_and_used_consistently(tiny_gguf: Path) -> None:
    """llama.cpp pads n_ctx=64 to 256; the engine's batch and token buffer follow the padded context, not the request."""
    with EngineClient() as engine:
        loaded = engine.load(tiny_gguf, n_ctx=64, n_threads=T)
        assert loaded.n_ctx == 256 and loaded.n_batch <= 256
        prompt = [BOS_ID] + list(range(10, 160))
        fin = engine.generate(ReplyRequest.chat([], sampling=Sampling(max_tokens=4), prompt_tokens=prompt, ignore_eos=True)).wait()
        assert fin.status == "length" and fin.metrics["prompt_tokens"] == 151, fin.error
        assert engine.load(tiny_gguf, n_ctx=300, n_threads=T).n_ctx == 512


def test_context_full_stops_with_length(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_ctx=256, n_threads=T)
        fin = engine.generate(ReplyRequest.chat(user("go"), sampling=Sampling(seed=1), ignore_eos=True)).wait()
        assert fin.status == "length" and fin.metrics["stop_reason"] == "length"
        assert fin.metrics["context_used"] == 256
        assert fin.metrics["prompt_tokens"] + fin.metrics["gen_tokens"] == 257
        after = engine.generate(ReplyRequest.chat(user("again"), sampling=Sampling(max_tokens=3), ignore_eos=True)).wait()
        assert after.status == "length" and after.error is None


def test_long_history_drops_oldest_turns_and_an_oversized_message_is_an_error(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_ctx=256, n_threads=T)
        history: list[dict] = [{"role": "system", "content": "sys"}]
        for i in range(12):
            history += [{"role": "user", "content": f"question {i} " * 3}, {"role": "assistant", "content": f"answer {i} " * 3}]
        history.append({"role": "user", "content": "latest"})
        fin = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), ignore_eos=True)).wait()
        assert fin.status == "length"
        assert fin.metrics["dropped_turns"] > 0 and fin.started is not None and fin.started.dropped_turns > 0
        assert fin.metrics["prompt_tokens"] <= 256 - 4
        huge = engine.generate(ReplyRequest.chat(user("word " * 400), sampling=Sampling(max_tokens=4))).wait()
        assert huge.status == "error" and huge.text == ""
        assert "context holds 256" in (huge.error or "") and huge.metrics["error_kind"] == "context"


def test_max_tokens_and_benchmark_shaped_requests(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf, n_threads=T)
    for _ in range(2):
        fin = engine.generate(
            ReplyRequest.chat([], sampling=Sampling(max_tokens=16, temperature=0.0), prompt_tokens=[BOS_ID], ignore_eos=True, no_cache=True)
        ).wait()
        m = fin.metrics
        assert fin.status == "length" and m["gen_tokens"] == 16 and m["cached_tokens"] == 0
        assert m["prompt_tokens"] == 1 and m["template_source"] == "tokens"
        assert m["llama_n_eval"] == 16  # cross-check: llama.cpp counted 16 one-token decodes
    bad = engine.generate(ReplyRequest.chat([], sampling=Sampling(max_tokens=2), prompt_tokens=[10**9])).wait()
    assert bad.status == "error" and "vocabulary" in (bad.error or "")


def test_stop_strings_are_never_shown(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf, n_threads=T)
    fin = engine.generate(ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=400, seed=5), ignore_eos=True, stop=["e", "a"])).wait()
    assert fin.metrics["stop_reason"] == "stop" and fin.status == "complete"
    assert "e" not in fin.text and "a" not in fin.text


def test_ignore_eos_runs_past_the_formats_end_of_turn_string_but_not_the_requests_own(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf, n_threads=T)
    tokens = tiny_vocab()[0]
    # Only "\n", "Q" and ":" can be picked, so the base-model format's "\nQ:" soon turns up.
    bias = ((tokens.index("<0x0A>"), 100.0), (tokens.index("Q"), 100.0), (tokens.index(":"), 100.0))
    ended = engine.generate(ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=200, seed=5, logit_bias=bias))).wait()
    assert ended.metrics["template_source"] == "fallback:qa"
    assert ended.status == "complete" and ended.metrics["gen_tokens"] < 200 and "\nQ:" not in ended.text
    assert ended.metrics["stop_sequence"] is None
    full = engine.generate(ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=200, seed=5, logit_bias=bias), ignore_eos=True)).wait()
    assert full.status == "length" and full.metrics["gen_tokens"] == 200 and "\nQ:" in full.text
    own = engine.generate(
        ReplyRequest.chat(user("x"), sampling=Sampling(max_tokens=200, seed=5, logit_bias=bias), ignore_eos=True, stop=["\nQ:"])
    ).wait()
    assert own.status == "complete" and own.metrics["stop_sequence"] == "\nQ:" and own.text == ended.text


def test_missing_and_damaged_files_are_sentences_and_the_host_survives(engine: EngineClient, tiny_gguf: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="does not exist"):
        engine.load(tmp_path / "nope.gguf", n_threads=T)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(64))
    with pytest.raises(EngineError) as err:
        engine.load(bad, n_threads=T)
    assert str(err.value).startswith("llama.cpp could not load bad.gguf:") and "Traceback" not in str(err.value)
    pid = engine.host_pid
    assert engine.load(tiny_gguf, n_threads=T).n_ctx == 512 and engine.host_pid == pid


def test_host_killed_mid_stream_is_an_error_then_the_next_reply_respawns(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_threads=T)
        first_pid = engine.host_pid
        assert first_pid is not None
        gen = engine.generate(
            ReplyRequest.chat(user("stream"), sampling=Sampling(max_tokens=100_000), conversation_id="k", ignore_eos=True)
        )
        got = 0
        for event in gen:
            if isinstance(event, TokenEvent):
                got += 1
                if got == 3:
                    os.kill(first_pid, signal.SIGKILL)
        fin = gen.wait()
        assert fin.status == "error" and len(fin.text) > 0
        assert fin.error == "the engine stopped unexpectedly (killed by signal 9 (SIGKILL), perhaps out of memory) while generating"
        again = engine.generate(
            ReplyRequest.chat(user("again"), sampling=Sampling(max_tokens=3), conversation_id="k", ignore_eos=True)
        ).wait()
        assert again.status == "length", again.error
        assert engine.host_pid not in (None, first_pid) and engine.loaded is not None


def test_ctrl_c_reaching_the_host_does_not_kill_it(engine: EngineClient, tiny_gguf: Path) -> None:
    """A terminal's Ctrl-C reaches the whole process group; the parent decides it means cancel."""
    engine.load(tiny_gguf, n_threads=T)
    pid = engine.host_pid
    assert pid is not None
    gen = engine.generate(ReplyRequest.chat(user("x"), ignore_eos=True))  # runs until the context is full
    next(gen)
    os.kill(pid, signal.SIGINT)
    assert gen.wait(30).status == "length"
    time.sleep(0.2)
    assert engine.generate(ReplyRequest.chat(user("y"), sampling=Sampling(max_tokens=2))).wait(30).error is None
    assert engine.host_pid == pid


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_host_environment_has_no_tokens_and_is_offline(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_CANARY_1")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_CANARY_2")
    monkeypatch.setenv("GITHUB_TOKEN", "CANARY_3")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_threads=T)
        pid = engine.host_pid
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    names = {e.split(b"=", 1)[0].decode() for e in environ if e}
    assert not [n for n in names if "TOKEN" in n.upper()]
    assert b"CANARY" not in b"\0".join(environ) and b"CANARY" not in cmdline
    assert b"HF_HUB_OFFLINE=1" in environ and b"HF_HUB_DISABLE_TELEMETRY=1" in environ and b"DO_NOT_TRACK=1" in environ


def test_malicious_template_is_not_run_and_the_fallback_is_reported(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    evil = "{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}"
    model = write_tiny_gguf(tmp_path / "evil.gguf", chat_template=evil)
    with EngineClient() as engine:
        loaded = engine.load(model, n_threads=T)
        assert loaded.template_source == "fallback:plain" and "sandbox" in loaded.template_note
        fin = engine.generate(ReplyRequest.chat(user("hi"), sampling=Sampling(max_tokens=3), ignore_eos=True)).wait()
        assert fin.status == "length" and fin.metrics["template_source"] == "fallback:plain"
    assert not marker.exists()


def test_template_that_never_finishes_times_out_and_falls_back(tmp_path: Path) -> None:
    endless = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"
    model = write_tiny_gguf(tmp_path / "dos.gguf", chat_template=endless)
    with EngineClient() as engine:
        t0 = time.perf_counter()
        loaded = engine.load(model, n_threads=T)
        assert time.perf_counter() - t0 < 30
        assert loaded.template_source == "fallback:plain" and "longer than 3 s" in loaded.template_note
        fin = engine.generate(ReplyRequest.chat(user("hi"), sampling=Sampling(max_tokens=3), ignore_eos=True)).wait()
        assert fin.status == "length"


def test_broken_template_still_loads(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "broken.gguf", chat_template="{% for %}")
    with EngineClient() as engine:
        loaded = engine.load(model, n_threads=T)
        assert loaded.template_source == "fallback:plain" and "TemplateSyntaxError" in loaded.template_note


def test_a_refused_huge_paste_is_dropped_by_the_turns_after_it(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_ctx=512, n_threads=T)
        history: list[dict] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
        first = engine.generate(
            ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), conversation_id="paste", ignore_eos=True)
        ).wait()
        history += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "log line 42 " * 100_000}]
        refused = engine.generate(ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), conversation_id="paste")).wait()
        assert refused.status == "error" and refused.metrics["error_kind"] == "context"
        assert "your message is at least" in (refused.error or "") and "context holds 512" in (refused.error or "")
        history.append({"role": "user", "content": "and now?"})  # the refused paste stays; its error reply is not resent
        after = engine.generate(
            ReplyRequest.chat(history, sampling=Sampling(max_tokens=4), conversation_id="paste", ignore_eos=True)
        ).wait()
        assert after.status == "length" and after.metrics["dropped_turns"] == 2
        assert after.metrics["prompt_tokens"] < 200  # the system prompt, the newest message and the base-model transcript's examples


def test_the_reply_names_the_stop_string_of_the_request_it_met(engine: EngineClient, tiny_gguf: Path) -> None:
    engine.load(tiny_gguf)
    # Nearly every letter pair of the tiny vocabulary is a token: within 300 tokens an "e" comes.
    stopped = [
        e
        for e in engine.generate(ReplyRequest.chat(user("hi"), sampling=Sampling(max_tokens=300, temperature=0), stop=["e", "zq"]))
        if isinstance(e, FinishedEvent)
    ][0]
    assert stopped.status == "complete" and stopped.metrics["stop_sequence"] == "e" and "e" not in stopped.text
    free = [
        e
        for e in engine.generate(ReplyRequest.chat(user("hi"), sampling=Sampling(max_tokens=3, temperature=0)))
        if isinstance(e, FinishedEvent)
    ][0]
    assert free.metrics["stop_sequence"] is None
