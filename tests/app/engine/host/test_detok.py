"""Incremental detokenization, stop-string hold-back and the token transcript (no model needed,
except the last test, which round-trips text through the tiny model's real tokenizer)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from app.engine.host.detok import IncrementalDetokenizer, StopMatcher
from app.engine.host.transcript import STATELESS, Transcript, common_prefix, kept_reply, plan_prompt


def _pieces(chunks: list[bytes]) -> tuple[IncrementalDetokenizer, list[int]]:
    table = dict(enumerate(chunks))
    return IncrementalDetokenizer(table.__getitem__), list(table)


def _stream(chunks: list[bytes]) -> list[str]:
    det, ids = _pieces(chunks)
    return [det.feed(i) for i in ids]


def test_multibyte_character_split_across_tokens_appears_when_complete() -> None:
    det, _ = _pieces([b"caf", b"\xc3", b"\xa9", b"!"])
    assert det.feed(0) == "caf"
    assert det.feed(1) == "" and det.pending
    assert det.feed(2) == "é" and not det.pending
    assert det.feed(3) == "!"
    assert det.chars == 5


@pytest.mark.parametrize("split", [1, 2, 3])
def test_emoji_split_anywhere(split: int) -> None:
    emoji = "🙂".encode()
    out = _stream([b"a" + emoji[:split], emoji[split:] + b"b"])
    assert out == ["a", "🙂b"]


def test_each_byte_of_an_emoji_as_its_own_token() -> None:
    out = _stream([bytes([b]) for b in "x🙂y".encode()])
    assert "".join(out) == "x🙂y"
    assert out[1:4] == ["", "", ""]  # nothing shown until the fourth byte


def test_invalid_bytes_become_replacement_characters_and_control_tokens_show_nothing() -> None:
    assert "".join(_stream([b"\xff", b"ok", b""])) == "\ufffdok"


def test_stop_string_split_across_tokens_is_never_emitted() -> None:
    m = StopMatcher(["\nUser:"])
    shown = []
    for chunk in ["Hello", " there.", "\n", "Us", "er: next"]:
        out, hit = m.push(chunk)
        shown.append(out)
        if hit:
            break
    assert hit
    assert "".join(shown) == "Hello there."
    assert shown[2:4] == ["", ""]  # "\n" and "\nUs" were held back


def test_held_back_text_is_released_when_it_is_not_a_stop() -> None:
    m = StopMatcher(["\nUser:"])
    assert m.push("a\nUs") == ("a", False)
    assert m.push("ually") == ("\nUsually", False)
    assert m.push("\n") == ("", False)
    assert m.flush() == "\n"
    assert m.flush() == ""


def test_earliest_of_several_stops_wins_and_empty_stops_are_ignored() -> None:
    m = StopMatcher(["", "END", "<|im_end|>"])
    assert m.push("abc<|im_end|>xEND") == ("abc", True)
    assert StopMatcher([]).push("anything") == ("anything", False)


def test_stop_at_the_very_start() -> None:
    assert StopMatcher(["\nUser:"]).push("\nUser: hi") == ("", True)


def test_plan_prompt_reuses_the_transcript_tokens() -> None:
    prev = Transcript("c1", "<s>Q1 A1", (1, 10, 11, 99))  # 99: a generated token
    full = [1, 10, 11, 20, 21, 30]  # the whole new text tokenized in one go (A1 re-tokenized)
    tokens, reused = plan_prompt(prev, "c1", "<s>Q1 A1<e>Q2", full, lambda rest: [30] if rest == "<e>Q2" else [])
    assert reused and tokens == [1, 10, 11, 99, 30]


def test_plan_prompt_reuses_a_stateless_transcript_only_for_a_request_without_a_conversation() -> None:
    prev = Transcript(STATELESS, "<s>Q1 A1", (1, 10, 11, 99))  # an API request's reply
    full = [1, 10, 11, 20, 21, 30]
    tokens, reused = plan_prompt(prev, None, "<s>Q1 A1<e>Q2", full, lambda rest: [30] if rest == "<e>Q2" else [])
    assert reused and tokens == [1, 10, 11, 99, 30]
    tokens, reused = plan_prompt(prev, "c1", "<s>Q1 A1<e>Q2", full, lambda rest: [30])  # a conversation's turn
    assert not reused and tokens == full
    conversation = Transcript("c1", "<s>Q1 A1", (1, 10, 11, 99))  # ... and a conversation's, for an API request
    tokens, reused = plan_prompt(conversation, None, "<s>Q1 A1<e>Q2", full, lambda rest: [30])
    assert not reused and tokens == full


@pytest.mark.parametrize(
    "conversation, text, rest_tokens",
    [
        ("c2", "<s>Q1 A1<e>Q2", [30]),  # another conversation
        ("c1", "<s>Q1 B<e>Q2", [30]),  # the text changed (an earlier turn was edited or dropped)
        ("c1", "<s>Q1 A1<e>Q2", [31]),  # the rest tokenizes differently alone (space prefix, merge)
    ],
)
def test_plan_prompt_falls_back_to_the_full_tokenization(conversation: str, text: str, rest_tokens: list[int]) -> None:
    prev = Transcript("c1", "<s>Q1 A1", (1, 10, 11, 99))
    full = [1, 10, 11, 20, 21, 30]
    tokens, reused = plan_prompt(prev, conversation, text, full, lambda rest: rest_tokens)
    assert not reused and tokens == full


def test_kept_reply_stops_at_the_last_whole_character_before_the_cut() -> None:
    boundaries = [(1, 3), (2, 5), (4, 6), (5, 10)]  # token 3 ended mid-character
    assert kept_reply(boundaries, 10) == (5, 10)
    assert kept_reply(boundaries, 7) == (4, 6)  # a stop string began inside token 5
    assert kept_reply(boundaries, 2) == (0, 0)
    assert kept_reply([], 5) == (0, 0)


def test_common_prefix() -> None:
    kv = np.array([1, 2, 3, 4], dtype=np.intc)
    assert common_prefix(kv, [1, 2, 3, 4, 5]) == 4
    assert common_prefix(kv, [1, 2, 9]) == 2
    assert common_prefix(kv[:0], [1]) == 0
    assert common_prefix(kv, []) == 0


@pytest.mark.timeout(60)
def test_real_tokenizer_round_trip_through_the_incremental_detokenizer(tiny_gguf: Path) -> None:
    from app.engine.host.session import ModelSession
    from app.engine.protocol import Generate, Load

    session = ModelSession(Load("l", str(tiny_gguf)))
    try:
        text = "héllo wörld 🙂 日本"
        tokens = session.tokenize(text, add_bos=False)
        assert len(tokens) > len(text)  # byte fallback: é, ö, the emoji and CJK are byte tokens
        det = IncrementalDetokenizer(session.piece)
        assert "".join(det.feed(t) for t in tokens) == " " + text  # SentencePiece adds one space
        assert session.piece(session.llm.token_bos()) == b""  # control tokens are never shown
        done = session.generate(Generate("g", None, [{"role": "user", "content": text}], max_tokens=3), lambda b: None, threading.Event())
        assert done.stop_reason in {"stop", "length"}
    finally:
        session.close()


def test_the_stop_matcher_names_the_stop_string_it_met() -> None:
    from app.engine.host.detok import StopMatcher

    matcher = StopMatcher(["END", "halt"])
    assert matcher.push("go on ha") == ("go on ", False) and matcher.matched is None
    assert matcher.push("lt now") == ("", True) and matcher.matched == "halt"
