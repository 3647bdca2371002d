"""Stream shapes real servers send besides the usual one, from stand-ins on 127.0.0.1: a
thinking model's reasoning deltas, llama-server's final usage and timings, an error event in
the middle of a stream, events run together without blank lines, a stream that ends without
[DONE], and a whole JSON reply to a stream request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.responses import JSONResponse, Response

from app.engine.request import ReplyRequest, Sampling
from app.statuses import MessageStatus
from models.network import NetworkGate
from tests.app.remote.conftest import engine_for, stand_in


def chunk(content: str | None = None, *, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    if content is not None:
        delta["content"] = content
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def sse(*payloads: dict[str, Any] | str, separator: bytes = b"\n\n") -> Response:
    body = b"".join(b"data: " + (p.encode() if isinstance(p, str) else json.dumps(p).encode()) + separator for p in payloads)
    return Response(body, media_type="text/event-stream")


def served(answer: Response) -> Iterator[str]:
    yield from stand_in({"/v1/chat/completions": answer})


def ask(url: str, gate: NetworkGate):
    engine, model = engine_for(url, gate)
    final = engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=32)), model=model).wait(10)
    engine.close()
    return final


def test_reasoning_is_shown_as_thinking_then_the_answer(gate: NetworkGate) -> None:
    answer = sse(
        chunk(role="assistant", content=""),
        chunk(reasoning_content="Let me "),
        chunk(reasoning_content="see."),
        chunk("It is 4."),
        chunk(finish="stop"),
        "[DONE]",
    )
    for url in served(answer):
        final = ask(url, gate)
    assert final.status == MessageStatus.COMPLETE
    assert final.text == "<think>\nLet me see.\n</think>\n\nIt is 4."
    assert final.metrics["gen_tokens"] == 3  # the pieces that came, not the tags around the thinking


def test_llama_server_s_final_usage_and_timings_become_the_figures(gate: NetworkGate) -> None:
    timings = {"prompt_n": 12, "prompt_ms": 30.5, "predicted_n": 3, "predicted_ms": 9.0, "predicted_per_second": 333.3, "cache_n": 8}
    usage = {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}
    answer = sse(
        chunk(role="assistant", content=None),
        chunk("a"),
        chunk("b"),
        chunk("c"),
        {**chunk(finish="length"), "timings": timings},
        {"object": "chat.completion.chunk", "choices": [], "usage": usage, "timings": timings},
        "[DONE]",
        separator=b"\r\n\r\n",
    )
    for url in served(answer):
        final = ask(url, gate)
    assert final.status == MessageStatus.LENGTH and final.text == "abc"
    m = final.metrics
    assert m["prompt_tokens"] == 20 and m["gen_tokens"] == 3 and m["cached_tokens"] == 8
    assert m["remote"]["server_usage"] == usage and m["remote"]["server_timings"] == timings


def test_an_error_event_mid_stream_interrupts_with_the_server_s_words(gate: NetworkGate) -> None:
    answer = sse(chunk("partial "), chunk("text"), {"error": {"message": "the slot was lost", "type": "server_error"}})
    for url in served(answer):
        final = ask(url, gate)
    assert final.status == MessageStatus.INTERRUPTED and final.text == "partial text"
    assert "stopped the reply with an error: the slot was lost" in (final.error or "")
    before = sse({"error": {"message": "context size exceeded", "type": "server_error"}})
    for url in served(before):
        failed = ask(url, gate)
    assert failed.status == MessageStatus.ERROR and "context size exceeded" in (failed.error or "")


def test_events_run_together_and_no_done_still_read_whole(gate: NetworkGate) -> None:
    together = Response(
        b"".join(b"data: " + json.dumps(c).encode() + b"\n" for c in (chunk("x"), chunk("y"), chunk(finish="stop"))),
        media_type="text/event-stream",
    )
    for url in served(together):
        final = ask(url, gate)
    assert final.status == MessageStatus.COMPLETE and final.text == "xy"


def test_a_whole_json_reply_to_a_stream_request_is_taken(gate: NetworkGate) -> None:
    whole = JSONResponse(
        {
            "object": "chat.completion",
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}],
        }
    )
    for url in served(whole):
        final = ask(url, gate)
    assert final.status == MessageStatus.COMPLETE and final.text == "Hello!" and final.metrics["prompt_tokens"] == 5


@pytest.mark.parametrize("body", [b"<html>gateway</html>\n", b""])
def test_a_stream_with_nothing_readable_is_an_error(gate: NetworkGate, body: bytes) -> None:
    for url in served(Response(body, media_type="text/html")):
        final = ask(url, gate)
    assert final.status == MessageStatus.ERROR and "ended the stream before the reply finished" in (final.error or "")


def test_a_bare_done_without_a_reason_is_an_interrupted_reply(gate: NetworkGate) -> None:
    """[DONE] with no finish_reason before it is how llama-cpp-python's server stops a reply for
    another request: the text is kept and the reply is not called complete."""
    for url in served(sse(chunk(role="assistant", content=""), chunk("Once "), chunk("upon"), "[DONE]")):
        final = ask(url, gate)
    assert final.status == MessageStatus.INTERRUPTED and final.text == "Once upon"
    assert "ended the reply without saying it was finished" in (final.error or "")
    for url in served(sse(chunk(role="assistant", content=""), "[DONE]")):
        empty = ask(url, gate)
    assert empty.status == MessageStatus.ERROR and "ended the reply without saying it was finished" in (empty.error or "")
