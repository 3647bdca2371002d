"""The sentences for a server's error replies: which problem, the server's own message trimmed
and with the key scrubbed out, Retry-After."""

from __future__ import annotations

import json

import pytest

from app.remote.errors import SERVER_MESSAGE_CHARS, RemoteProblem, problem_from_status, scrub, server_message

KEY = "sk-secretKEY123456"
HOST = "gpu-box.lan:8000"


def problem(status: int, body: object = "", headers: dict[str, str] | None = None, **kwargs: object) -> RemoteProblem:
    raw = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return problem_from_status(status, headers or {}, raw, host=HOST, **{"key": KEY, **kwargs})  # type: ignore[arg-type]


def test_each_status_is_its_kind_of_problem_and_names_the_host() -> None:
    cases = {401: "auth", 403: "auth", 404: "not_found", 429: "busy", 500: "server", 502: "server", 503: "server", 400: "server"}
    for status, kind in cases.items():
        found = problem(status, {"error": {"message": "nope"}})
        assert found.kind == kind and found.status == status
        assert HOST in str(found) and f"HTTP {status}" in str(found) and "nope" in str(found)
    assert "refused the key" in str(problem(401))
    assert "asks for a key" in str(problem(401, key=None))
    assert "no model 'big-model'" in str(problem(404, model_id="big-model"))


def test_busy_says_how_long_to_wait_when_the_server_said() -> None:
    busy = problem(429, {"error": {"message": "too many requests"}}, {"retry-after": "7"})
    assert busy.retry_after_s == 7.0 and "wait 7 seconds" in str(busy)
    assert problem(429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}).retry_after_s is None
    assert "try again in a moment" in str(problem(429))
    assert problem(503, headers={"retry-after": "1"}).retry_after_s == 1.0


def test_the_servers_message_is_found_in_every_usual_shape_trimmed_and_scrubbed() -> None:
    assert server_message(json.dumps({"error": {"message": "boom", "type": "x"}}), None) == "boom"
    assert server_message(json.dumps({"error": "flat"}), None) == "flat"
    assert server_message(json.dumps({"detail": "Not authenticated"}), None) == "Not authenticated"
    assert server_message(json.dumps({"detail": [{"msg": "field required"}]}), None) == "field required"
    assert server_message(json.dumps({"message": "m"}), None) == "m"
    assert server_message(b"plain\ntext  reply", None) == "plain text reply"
    assert server_message("<html><body>502 Bad Gateway</body></html>", None) == ""
    long = server_message("x" * 5000, None)
    assert len(long) == SERVER_MESSAGE_CHARS and long.endswith("…")
    echoed = problem(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    assert KEY not in str(echoed) and "[key]" in str(echoed)
    assert scrub("Authorization: Bearer abc.def", None) == "Authorization: Bearer [key]"


def test_a_context_error_says_so() -> None:
    found = problem(400, {"error": {"message": "This model's maximum context length is 4096 tokens"}})
    assert "too long for the model's context" in str(found) and found.kind == "context"


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError):
        RemoteProblem("x", "whatever")
