"""`cove serve` with a real client no one here wrote: the official `openai` package against the
server on 127.0.0.1 with the tiny model the suite writes (streaming and not), the errors as
their exception types, the Host-header and size guards, and a client that leaves mid-stream."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.serve.http.http import CHAT_BODY_BYTES
from tests.support.serve_fixture import Served, cove_serve, requests_of

_SERVED: list[Served] = []  # the module's server, for the command line against its home


def cove(*args: str) -> subprocess.CompletedProcess:
    return _SERVED[0].cove(*args)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with cove_serve(tmp_path_factory.mktemp("serve")) as served:
        _SERVED[:] = [served]
        yield f"{served.url}/v1"


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)


def test_models_lists_the_installed_model(server: str) -> None:
    assert [m.id for m in client(server).models.list()] == ["auto", "tiny"]  # "auto": the model Auto chooses


def test_a_chat_completion_has_text_usage_and_coves_timings(server: str) -> None:
    reply = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        max_tokens=6,
        temperature=0,
        seed=1,
    )
    assert reply.object == "chat.completion" and reply.model == "tiny"
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage is not None and reply.usage.prompt_tokens > 0 and 1 <= reply.usage.completion_tokens <= 6
    timings = reply.model_extra["timings"]
    assert timings["ttft_ms"] > 0 and set(timings) == {"prompt_ms", "ttft_ms", "tokens_per_second", "cached_tokens"}
    again = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        max_tokens=6,
        temperature=0,
        seed=1,
    )
    assert again.choices[0].message.content == choice.message.content  # greedy: the same reply


def test_a_streamed_completion_arrives_in_chunks_and_ends_with_usage(server: str) -> None:
    stream = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "tell me more"}],
        max_tokens=2000,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    # Tokens that arrive within 20 ms of the last chunk share the next one; the reply runs to the
    # end of the tiny model's 512-token context, which takes longer.
    assert chunks[0].choices[0].delta.role == "assistant" and len(texts) >= 2 and finishes in (["length"], ["stop"])
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None and 1 <= usage.completion_tokens < 512


@pytest.mark.parametrize(
    ("body", "error", "param"),
    [
        ({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}, openai.NotFoundError, "model"),
        ({"model": "tiny", "messages": []}, openai.BadRequestError, "messages"),
        ({"model": "tiny", "messages": [{"role": "wizard", "content": "hi"}]}, openai.BadRequestError, "messages"),
        ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, openai.BadRequestError, "temperature"),
        ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**9}, openai.BadRequestError, "max_tokens"),
        ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "n": 3}, openai.BadRequestError, "n"),
    ],
)
def test_bad_requests_get_the_apis_error_types(server: str, body: dict, error: type, param: str) -> None:
    with pytest.raises(error) as caught:
        client(server).chat.completions.create(**body)
    assert caught.value.body["param"] == param and "Traceback" not in caught.value.message


def test_unknown_fields_are_ignored_as_the_real_api_does(server: str) -> None:
    reply = client(server).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2, extra_body={"logit_bias_v9": {"1": 2}, "user": "me"}
    )
    assert reply.choices[0].message.content is not None


def test_malformed_json_an_oversized_body_and_a_foreign_host_are_refused(server: str) -> None:
    url = f"{server}/chat/completions"
    bad = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    huge = httpx.post(
        url,
        content=b'{"model": "tiny", "x": "' + b"a" * (CHAT_BODY_BYTES + 1) + b'"}',  # (a chat body may hold images)
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert huge.status_code == 413 and "larger than" in huge.json()["error"]["message"]
    rebinding = httpx.get(f"{server}/models", headers={"Host": "evil.example"}, timeout=30)
    assert rebinding.status_code == 421 and "evil.example" in rebinding.json()["error"]["message"]
    assert "access-control-allow-origin" not in {k.lower() for k in rebinding.headers}
    assert httpx.get(f"{server}/models", timeout=30).status_code == 200  # the server is still up


def test_a_client_that_leaves_mid_stream_frees_the_engine_for_the_next(server: str) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 4000, "stream": True}
    with httpx.stream("POST", f"{server}/chat/completions", json=body, timeout=60) as response:
        lines = response.iter_lines()
        got = [line for line, _ in zip(lines, range(6)) if line.startswith("data: ")]
        assert got and json.loads(got[0][6:])["object"] == "chat.completion.chunk"
    # At once: the engine was stopped and waited for, so it is free (not "a reply is already
    # being generated", which a request that arrived while it wrote 4,000 tokens would get).
    reply = client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert reply.usage is not None and reply.usage.completion_tokens >= 1


def test_the_server_never_opens_a_connection_out(server: str, tmp_path: Path) -> None:
    # The server process's own sockets: listening on loopback and talking to this test only.
    import psutil

    port = int(server.rsplit(":", 1)[1].split("/")[0])
    (serving,) = [
        p for p in psutil.process_iter(["cmdline"]) if "serve" in (p.info["cmdline"] or []) and str(port) in (p.info["cmdline"] or [])
    ]
    client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    remote = {c.raddr.ip for c in serving.net_connections(kind="inet") if c.raddr}
    assert remote <= {"127.0.0.1"}


def _record() -> list[dict]:
    done = cove("record", "export", "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_every_request_is_in_the_record_once_and_the_record_verifies_until_edited(server: str) -> None:
    before = len(requests_of(_record()))
    client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "first"}], max_tokens=3, temperature=0)
    list(client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "second"}], max_tokens=3, stream=True))
    entries = _record()
    requests = requests_of(entries)
    assert len(requests) == before + 2
    sha = json.loads(cove("models", "list", "--json").stdout)[0]["sha256"]
    for entry, question, stream in zip(requests[-2:], ("first", "second"), (False, True)):
        assert entry["client"] == "local API" and entry["remote"] == "127.0.0.1" and entry["endpoint"] == "/v1/chat/completions"
        assert entry["model_name"] == "tiny" and entry["model_sha256"] == sha and entry["status"] == "length"
        assert json.loads(entry["messages"]) == [{"role": "user", "content": question}]
        assert json.loads(entry["params"])["stream"] is stream and json.loads(entry["usage"])["completion_tokens"] == 3
        assert entry["closing"]["client"] == "local API" and entry["closing"]["conversation_id"] == entry["conversation_id"]
    verified = cove("record", "verify", "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["intact"] is True
    database = next(Path(_SERVED[0].env["COVE_HOME"]).rglob("*.db"))
    import sqlite3

    with sqlite3.connect(database) as db:
        db.execute("UPDATE record_entries SET reply = 'forged' WHERE seq = ?", [entries[-1]["seq"]])
    tampered = cove("record", "verify")
    assert tampered.returncode == 1 and "NOT INTACT" in tampered.stdout and f"do not match): {entries[-1]['seq']}." in tampered.stdout


def test_with_keys_made_a_request_needs_one_and_the_record_names_it(server: str) -> None:
    made = cove("serve", "keys", "add", "editor")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("cove-") and "shown this once" in made.stderr
    try:
        with pytest.raises(openai.AuthenticationError):
            client(server).models.list()  # the key "unused"
        keyed = openai.OpenAI(base_url=server, api_key=key, max_retries=0, timeout=60)
        keyed.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert [e["client"] for e in _record()[-2:]] == ["editor", "editor"]
        assert cove("serve", "keys", "list").stdout.split() == ["editor"]
        assert key not in Path(next(Path(_SERVED[0].env["COVE_HOME"]).rglob("*.db"))).read_bytes().decode("latin-1")  # only its hash
        again = cove("serve", "keys", "add", "editor")
        assert again.returncode != 0 and "already" in again.stderr and "Traceback" not in again.stderr
    finally:
        assert cove("serve", "keys", "remove", "editor").returncode == 0
    assert [m.id for m in client(server).models.list()] == ["auto", "tiny"]  # no keys left: loopback is open again


SCHEMA = {
    "type": "object",
    "properties": {"mood": {"enum": ["calm", "busy"]}, "n": {"enum": [1, 2, 3]}},
    "required": ["mood", "n"],
    "additionalProperties": False,
}


def test_structured_output_parses_against_its_schema(server: str) -> None:
    reply = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "how are you?"}],
        max_tokens=200,
        temperature=0.7,
        seed=5,
        response_format={"type": "json_schema", "json_schema": {"name": "mood", "schema": SCHEMA, "strict": True}},
    )
    value = json.loads(reply.choices[0].message.content)
    assert set(value) == {"mood", "n"} and value["mood"] in ("calm", "busy") and value["n"] in (1, 2, 3)
    anything = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "json please"}],
        max_tokens=300,
        temperature=0,
        seed=2,
        response_format={"type": "json_object"},
    )
    if anything.choices[0].finish_reason == "stop":  # a random model may still be inside the object at max_tokens
        assert isinstance(json.loads(anything.choices[0].message.content), dict)
    else:
        assert anything.choices[0].message.content.lstrip().startswith("{")


def test_a_response_format_that_cannot_be_enforced_is_a_bad_request(server: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], response_format={"type": "xml"})
    assert caught.value.body["param"] == "response_format" and "xml" in caught.value.message


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_larger_than_the_context_is_a_400_with_the_numbers(server: str, stream: bool) -> None:
    long = " ".join(f"word{i}" for i in range(900))  # thousands of byte-level tokens; the tiny model holds 512
    with pytest.raises(openai.BadRequestError) as caught:
        result = client(server).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": long}], max_tokens=16, stream=stream
        )
        list(result) if stream else None
    body = caught.value.body
    assert body["code"] == "context_length_exceeded" and body["param"] == "messages"
    assert "512" in body["message"] and "kept for the reply" in body["message"]
    assert (
        client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2).choices
    )  # and the server goes on


def test_a_model_may_be_named_by_its_file_or_in_other_letters(server: str) -> None:
    for name in ("TINY", "tiny.gguf"):
        reply = client(server).chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert reply.model == "tiny"


def test_a_text_completion_completes_the_prompt_as_it_is(server: str) -> None:
    api = client(server)
    done = api.completions.create(model="tiny", prompt="Once upon a time", max_tokens=5, temperature=0, seed=1)
    assert done.object == "text_completion" and isinstance(done.choices[0].text, str)
    assert done.choices[0].finish_reason in ("stop", "length") and done.usage is not None
    chat = api.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Once upon a time"}], max_tokens=5, temperature=0, seed=1
    )
    # No chat template around it: the same words are fewer tokens than as a chat message.
    assert done.usage.prompt_tokens < chat.usage.prompt_tokens
    streamed = list(api.completions.create(model="tiny", prompt="Once upon a time", max_tokens=5, temperature=0, seed=1, stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == done.choices[0].text
    with pytest.raises(openai.BadRequestError) as caught:
        api.completions.create(model="tiny", prompt="x", echo=True)
    assert caught.value.body["param"] == "echo"
    with pytest.raises(openai.BadRequestError) as caught:
        api.completions.create(model="tiny", prompt=["one", "two"])
    assert caught.value.body["param"] == "prompt"
