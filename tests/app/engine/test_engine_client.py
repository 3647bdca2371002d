"""EngineClient against a scripted fake host that speaks the same protocol: crashes, hangs,
late events and template hangs that real llama.cpp will not produce on demand."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from app.engine import protocol
from app.engine.client import EngineClient, EngineError, FinishedEvent, TokenEvent
from app.engine.process import describe_exit
from app.engine.request import ReplyRequest, Sampling, ToolOffer, generate_message
from tests.support.paths import SUPPORT_DIR

pytestmark = pytest.mark.timeout(60)

# The fake host: argv[1] is the mode, then the client's --in-fd N --out-fd M.
FAKE_HOST = r"""
import dataclasses, json, os, sys, time
from app.engine import protocol as p
mode = sys.argv[1]
fd_in, fd_out = int(sys.argv[sys.argv.index("--in-fd") + 1]), int(sys.argv[sys.argv.index("--out-fd") + 1])
def send(msg): os.write(fd_out, p.encode(msg))
send(p.Ready(pid=os.getpid()))
for line in os.fdopen(fd_in, "rb"):
    req = p.decode(line)
    if isinstance(req, p.Load):
        if mode == "exit_on_load":
            sys.stderr.write("fake: the model file made me give up\n"); sys.stderr.flush(); sys.exit(3)
        if mode == "template_hang" and req.use_model_template:
            send(p.Failed(req.request_id, "the model's chat template did not finish rendering within 3 s", "template"))
            os._exit(70)
        source = "gguf" if req.use_model_template else "fallback:plain"
        send(p.Loaded(req.request_id, req.model_path, 512, 512, 1, 0, "cpu", source, req.fallback_reason or "ok", 1.0))
    elif isinstance(req, p.Generate):
        if mode == "echo":  # the reply is the message it was sent, as JSON
            send(p.Finished(req.request_id, json.dumps(dataclasses.asdict(req)), "stop", {}))
            continue
        if mode == "late_events":
            send(p.Token("g-old", "STALE"))
            send(p.Finished("g-old", "STALE", "stop", {}))
        send(p.Started(req.request_id, 5, 0, 0, 1.0, "gguf"))
        for word in ("one ", "two ", "three "):
            send(p.Token(req.request_id, word))
        if mode == "hang_prefill":
            time.sleep(3600)  # ignores Cancel, like a long prompt evaluation
        if mode == "ignore_cancel":
            continue  # no end: it reads on, and ignores a Cancel
        if mode == "abort_on_generate":
            sys.stderr.write("GGML_ASSERT(fake) failed\n"); sys.stderr.flush(); os.abort()
        send(p.Finished(req.request_id, "one two three ", "stop", {"gen_tokens": 3}))
    elif isinstance(req, p.Cancel):
        if mode == "ignore_cancel":  # noted (FAKE_HOST_NOTES), then ignored
            with open(os.environ["FAKE_HOST_NOTES"], "a") as notes:
                notes.write(f"cancel {req.request_id}\n")
"""


def fake(mode: str, **kw: float) -> EngineClient:
    return EngineClient(host_argv=[sys.executable, "-c", FAKE_HOST, mode], **kw)


MSG = [{"role": "user", "content": "hi"}]


def test_normal_reply_and_late_events_of_other_requests_are_dropped(tmp_path: Path) -> None:
    with fake("late_events") as engine:
        engine.load(tmp_path / "m.gguf")
        before = time.perf_counter()
        gen = engine.generate(ReplyRequest.chat(MSG))
        events = list(gen)
        after = time.perf_counter()
        tokens = [e for e in events if isinstance(e, TokenEvent)]
        assert [e.text for e in tokens] == ["one ", "two ", "three "]
        fin = events[-1]
        assert isinstance(fin, FinishedEvent) and fin.status == "complete" and fin.text == "one two three "
        assert "STALE" not in fin.text
        # The time to the first token: from the request to this reply's first token (not the stale
        # one), on the clock of the tokens' arrival, within the reply's whole time on that clock.
        ttft_ms = fin.metrics["ttft_ms"]
        assert ttft_ms == round((tokens[0].t - gen.t_request) * 1000.0, 3)
        assert 0 < ttft_ms <= (after - before) * 1000.0


def test_every_field_of_the_request_reaches_the_host(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}}
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "the weather?", "passages": {"docs": ["one"]}},
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning": "look it up", "as_written": "<think>look it up</think>"},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"},
    ]
    request = ReplyRequest.chat(
        messages,
        sampling=Sampling(
            max_tokens=9,
            temperature=0.3,
            top_p=0.8,
            top_k=7,
            min_p=0.1,
            repeat_penalty=1.2,
            seed=42,
            presence_penalty=0.5,
            frequency_penalty=0.25,
            logit_bias=((5, -1.5), (7, 2)),
        ),
        conversation_id="c9",
        stop=["END"],
        grammar='root ::= "x"',
        tools=ToolOffer((tool,), choice="required", name="get_weather", parallel=False),
        raw_prompt="complete this",
        prompt_tokens=[1, 2, 3],
        keep_all_turns=True,
        ignore_eos=True,
        no_cache=True,
        speculative="off",
        priority="window",
        reasoning="low",
        image_files={"a" * 64: "/images/a"},
    )
    with fake("echo") as engine:
        engine.load(tmp_path / "m.gguf")
        gen = engine.generate(request)
        got = json.loads(gen.wait(20).text)
    assert got == dataclasses.asdict(generate_message(request, gen.request_id))
    assert got["messages"] == messages and got["conversation_id"] == "c9"
    assert (got["max_tokens"], got["temperature"], got["top_k"], got["seed"], got["logit_bias"]) == (9, 0.3, 7, 42, [[5, -1.5], [7, 2.0]])
    assert (got["tools"], got["tool_choice"], got["tool_name"], got["parallel_tool_calls"]) == ([tool], "required", "get_weather", False)
    assert (got["stop"], got["prompt_tokens"], got["priority"], got["reasoning"]) == (["END"], [1, 2, 3], "window", "low")
    assert got["images"] == {"a" * 64: "/images/a"}
    # Every field differs from the message's default, so none was left out on the way.
    default = dataclasses.asdict(protocol.Generate(gen.request_id, None, []))
    assert [k for k in default if k != "request_id" and got[k] == default[k]] == []


def test_generate_needs_a_model_and_replies_may_overlap_but_a_load_may_not(tmp_path: Path) -> None:
    with fake("hang_prefill", cancel_grace_s=0.5) as engine:
        with pytest.raises(EngineError, match="no model is loaded"):
            engine.generate(ReplyRequest.chat(MSG))
        engine.load(tmp_path / "m.gguf")
        gen = engine.generate(ReplyRequest.chat(MSG))
        second = engine.generate(ReplyRequest.chat(MSG))  # the host runs it in a slot or queues it
        assert second.request_id != gen.request_id and not second.done
        with pytest.raises(EngineError, match="cancel it before loading"):
            engine.load(tmp_path / "other.gguf")
        engine.cancel()  # every reply in flight
        assert gen.wait(10).status == "cancelled" and second.wait(10).status == "cancelled"


def test_cancel_that_the_host_ignores_kills_it_after_the_grace_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes.txt"
    monkeypatch.setenv("FAKE_HOST_NOTES", str(notes))
    with fake("ignore_cancel", cancel_grace_s=1.0) as engine:
        engine.load(tmp_path / "m.gguf")
        first = engine.host_pid
        gen = engine.generate(ReplyRequest.chat(MSG))
        texts = [next(gen).text for _ in range(3)]
        engine.cancel()
        fin = gen.wait(10)
        # The host was sent the Cancel and lived to read it (it was not killed at once); it went on,
        # so after the grace period the client replaced it.
        assert notes.read_text() == f"cancel {gen.request_id}\n"
        assert fin.status == "cancelled" and fin.text == "".join(texts) and fin.error is None
        assert fin.metrics.get("engine_restarted") is True
        gen2 = engine.generate(ReplyRequest.chat(MSG))  # a new host, the model reloaded
        assert [next(gen2).text for _ in range(3)] == ["one ", "two ", "three "]
        assert engine.host_pid not in (None, first)
        gen2.cancel()
        assert gen2.wait(10).status == "cancelled"


def test_host_abort_during_generation_is_a_readable_error(tmp_path: Path) -> None:
    with fake("abort_on_generate") as engine:
        engine.load(tmp_path / "m.gguf")
        fin = engine.generate(ReplyRequest.chat(MSG)).wait(20)
        assert fin.status == "error" and fin.text == "one two three "
        assert fin.error is not None and fin.error.startswith("the engine stopped unexpectedly (aborted (signal 6, SIGABRT)")
        assert "GGML_ASSERT(fake) failed" in fin.error and fin.error.endswith("while generating")
        assert engine.loaded is None


def test_host_that_exits_while_loading_raises_engine_error_each_time(tmp_path: Path) -> None:
    with fake("exit_on_load") as engine:
        for _ in range(2):  # the next load starts a new host
            with pytest.raises(EngineError) as err:
                engine.load(tmp_path / "m.gguf")
            assert str(err.value) == (
                "the engine stopped unexpectedly (exited with code 3: fake: the model file made me give up) while loading m.gguf"
            )


def test_hung_template_makes_the_client_reload_with_the_fallback(tmp_path: Path) -> None:
    with fake("template_hang") as engine:
        loaded = engine.load(tmp_path / "m.gguf")
        assert loaded.template_source == "fallback:plain"
        assert loaded.template_note.startswith("the model's chat template did not finish rendering")
        assert engine.generate(ReplyRequest.chat(MSG)).wait(10).status == "complete"


def test_close_is_idempotent_and_ends_a_running_reply(tmp_path: Path) -> None:
    engine = fake("hang_prefill")
    engine.load(tmp_path / "m.gguf")
    gen = engine.generate(ReplyRequest.chat(MSG))
    next(gen)
    engine.close()
    engine.close()
    assert gen.wait(5).status == "cancelled"
    with pytest.raises(EngineError, match="shut down"):
        engine.load(tmp_path / "m.gguf")


def test_exit_descriptions() -> None:
    assert describe_exit(-9) == "killed by signal 9 (SIGKILL), perhaps out of memory"
    assert describe_exit(137) == "killed by signal 9 (SIGKILL), perhaps out of memory"
    assert describe_exit(-11).startswith("crashed with signal 11 (SIGSEGV")
    assert describe_exit(-6, "noise\nGGML_ASSERT(x) failed\n") == "aborted (signal 6, SIGABRT): GGML_ASSERT(x) failed"
    assert describe_exit(1, "ModuleNotFoundError: No module named 'llama_cpp'\n") == (
        "exited with code 1: ModuleNotFoundError: No module named 'llama_cpp'"
    )


def test_abort_cancels_a_load_and_the_next_load_works(tmp_path):
    """The model picker's Cancel: a slow load is stopped with a sentence, nothing hangs."""
    import sys
    import threading
    import time as _time

    from app.engine.client import EngineClient, EngineError

    SCRIPTED_HOST = SUPPORT_DIR / "fake_host.py"
    slow_host = tmp_path / "slow_host.py"
    slow_host.write_text(
        "import sys, time, runpy\n"
        "from app.engine import protocol\n"
        "real_decode = protocol.decode\n"
        "def slow_decode(line):\n"
        "    msg = real_decode(line)\n"
        "    if isinstance(msg, protocol.Load) and 'slow' in msg.model_path:\n"
        "        time.sleep(60)\n"
        "    return msg\n"
        "protocol.decode = slow_decode\n"
        "sys.argv[0] = 'fake_host'\n"
        f"runpy.run_path({str(SCRIPTED_HOST)!r}, run_name='__main__')\n"
    )
    client = EngineClient(host_argv=[sys.executable, str(slow_host)], load_timeout_s=30)
    errors: list[str] = []

    def load_slow() -> None:
        try:
            client.load(str(tmp_path / "slow.gguf"))
        except EngineError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=load_slow)
    t.start()
    _time.sleep(1.0)
    client.abort()
    t.join(10)
    assert not t.is_alive()
    assert errors and "cancelled" in errors[0]
    assert client.load(str(tmp_path / "fine.gguf")).n_ctx > 0
    client.close()
