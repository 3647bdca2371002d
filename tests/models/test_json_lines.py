"""The JSON-lines codec both child processes speak (models/json_lines.py): a tagged dataclass
round-trips through one ASCII line, and a bad line raises the protocol's own error with a
sentence, never another exception."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from app.engine import protocol as engine_protocol
from models.download import protocol as download_protocol
from models.json_lines import LineError, TaggedCodec, dump_line, load_object


@dataclass(frozen=True)
class Ping:
    text: str
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Pong:
    n: int


class PingError(LineError):
    pass


CODEC: TaggedCodec[Ping | Pong] = TaggedCodec("kind", {"ping": Ping, "pong": Pong}, error=PingError)
TUPLES: TaggedCodec[Ping | Pong] = TaggedCodec("kind", {"ping": Ping, "pong": Pong}, error=PingError, tuples=True)


@pytest.mark.parametrize("msg", [Ping('hé\n🙂 \u2028 "q"'), Ping("", (1, 2)), Pong(-3)], ids=repr)
def test_a_message_round_trips_through_one_ascii_line(msg: Ping | Pong) -> None:
    line = CODEC.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("ascii")
    obj = json.loads(line)
    assert list(obj)[0] == "kind" and obj["kind"] == type(msg).__name__.lower()
    assert TUPLES.decode(line) == msg
    assert TUPLES.decode(line.decode("ascii")) == msg  # a text line too


def test_arrays_stay_lists_unless_the_codec_makes_tuples() -> None:
    line = CODEC.encode(Ping("x", (1, 2)))
    assert CODEC.decode(line).sizes == [1, 2]
    assert TUPLES.decode(line).sizes == (1, 2)


def test_unknown_keys_are_ignored() -> None:
    assert CODEC.decode(b'{"kind":"pong","n":1,"later":true}') == Pong(1)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"not json\n", "not a JSON line"),
        (b"\xff\xfe\n", "not a JSON line"),
        (b"[1,2]\n", "must be a JSON object"),
        (b"null\n", "must be a JSON object"),
        (b'{"kind":"exec"}\n', "unknown message type 'exec'"),
        (b'{"n":1}\n', "unknown message type None"),
        (b'{"kind":["pong"]}\n', "the tag 'kind' must be a string, not list"),
        (b'{"kind":{"a":1}}\n', "the tag 'kind' must be a string, not dict"),
        (b'{"kind":"pong"}\n', "bad pong message"),
        (b'{"kind":"pong","n":1,"extra":[' + b"[" * 100_000 + b"\n", "not a JSON line"),
    ],
)
def test_a_bad_line_raises_the_protocols_error_with_a_sentence(line: bytes, says: str) -> None:
    for codec in (CODEC, TUPLES):
        with pytest.raises(PingError) as caught:
            codec.decode(line)
        assert says in str(caught.value)
        assert "Traceback" not in str(caught.value)


def test_both_protocols_use_it_and_keep_their_own_error_class() -> None:
    for protocol, line in ((engine_protocol, b'{"type":["x"]}'), (download_protocol, b'{"event":["x"]}')):
        with pytest.raises(protocol.ProtocolError, match="must be a string"):
            protocol.decode(line)
        assert issubclass(protocol.ProtocolError, LineError) and issubclass(protocol.ProtocolError, ValueError)
    assert engine_protocol.decode(engine_protocol.encode(engine_protocol.Cancel("g1"))) == engine_protocol.Cancel("g1")
    progress = download_protocol.Progress(5, 10, 1.5, None)
    assert download_protocol.decode(download_protocol.encode(progress)) == progress


def test_dump_line_and_load_object() -> None:
    line = dump_line({"a": "é", "b": [1]})
    assert line == b'{"a":"\\u00e9","b":[1]}\n'
    assert load_object(line) == {"a": "é", "b": [1]}
    with pytest.raises(LineError, match="must be a JSON object"):
        load_object(b"[]")
    with pytest.raises(PingError, match="not a JSON line"):
        load_object("", PingError)


def test_a_download_job_line_that_is_not_json_never_quotes_the_token() -> None:
    with pytest.raises(download_protocol.ProtocolError) as caught:
        download_protocol.Job.from_line('{"token": "hf_secret"')
    assert "hf_secret" not in str(caught.value) and "not a download job" in str(caught.value)
