"""The pipe protocol: one JSON object per line, typed, never pickle."""

from __future__ import annotations

import json

import pytest

from app.engine import protocol as p

SAMPLES = [
    p.Load("l1", "/m/x.gguf", n_ctx=2048, n_threads=4, n_gpu_layers=0, flash_attn=None),
    p.Generate(
        "g1",
        "conv",
        [{"role": "user", "content": "hé\n🙂"}],
        max_tokens=5,
        seed=3,
        stop=["\nUser:"],
        prompt_tokens=[1, 2, 3],
        no_cache=True,
        ignore_eos=True,
        grammar='root ::= "a"',
        keep_all_turns=True,
    ),
    p.Cancel("g1"),
    p.Unload("u1"),
    p.Shutdown(),
    p.Ready(pid=42),
    p.Loaded("l1", "/m/x.gguf", 512, 512, 2, 0, "cpu", "fallback:plain", "note", 12.5),
    p.Unloaded("u1"),
    p.Embed("e1", ["hé", ""]),
    p.Embedded("e1", [[0.6, -0.8], [1.0, 0.0]], 7),
    p.Started("g1", 10, 4, 0, 1.5, "gguf"),
    p.Token("g1", 'a\nb\u2028"c"'),
    p.Finished("g1", "text", "length", {"gen_tokens": 3}),
    p.Failed("g1", "the engine failed.", "generate"),
    p.Failed("g2", "too long.", "context", prompt_tokens=9120, n_ctx=8192, reserve=512, at_least=True),
]


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip_one_ascii_line(msg: p.Message) -> None:
    line = p.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("ascii")
    assert p.decode(line) == msg
    assert json.loads(line)["type"] == type(msg).__name__.lower()


def test_fast_token_line_is_the_same_bytes() -> None:
    prefix = p.token_line_prefix("g7")
    for text in ["", "plain", 'é🙂\n\t"\\', "\x00"]:
        assert p.token_line(prefix, text) == p.encode(p.Token("g7", text))


@pytest.mark.parametrize("line", [b"not json\n", b"[1,2]\n", b'{"type":"exec"}\n', b'{"type":"token"}\n', b"\xff\n"])
def test_bad_lines_raise_protocol_error(line: bytes) -> None:
    with pytest.raises(p.ProtocolError):
        p.decode(line)


def test_unknown_fields_are_ignored() -> None:
    assert p.decode(b'{"type":"cancel","request_id":"g1","future":1}') == p.Cancel("g1")


def test_every_message_is_a_frozen_dataclass() -> None:
    import dataclasses

    for msg in SAMPLES:
        assert dataclasses.is_dataclass(msg)
        with pytest.raises(dataclasses.FrozenInstanceError):
            msg.request_id = "x"  # type: ignore[misc]
