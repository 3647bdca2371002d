"""What Auto learns from the person (app/routing/preferences.py): kept in the settings file and
read back after a restart, forgotten one kind or all at once, never taken from a file that is
not what Cove wrote, and used by the next choice; a reply regenerated with another model is what
the person kept only when the conversation goes on from it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from app.routing.auto import choose
from app.routing.candidates import Needs
from app.routing.preferences import alternatives, forget, kept_regeneration, learn, learned, preferred, regeneration_params
from app.settings import Settings, load_settings, read_settings
from tests.app.routing.test_auto import PAIR

ASK = Needs(tokens=40, reply=512)
SUM = "A shop sells pens at $3 each. Tom buys 7 pens and pays with $50. How much change does he get?"


def test_learned_survives_a_restart_and_the_next_choice_uses_it(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    before = choose(SUM, ASK, PAIR)
    assert before.model == "qwen-1.5b"
    learn(path, Settings(), "math", "qwen-0.5b", "asked")
    again = load_settings(path)  # as after a restart
    (item,) = learned(again)
    assert (item.kind, item.model, item.how) == ("math", "qwen-0.5b", "asked")
    assert item.sentence().startswith("For maths: qwen-0.5b (you asked for it, 20")
    after = choose(SUM, ASK, PAIR, preferred=preferred(again))
    assert after.model == "qwen-0.5b" and after.why == "maths; you chose it for maths before"
    # Another kind of task is not affected.
    assert choose("What is the capital of Australia?", ASK, PAIR, preferred=preferred(again)).model == "qwen-1.5b"


def test_a_learned_model_that_cannot_serve_the_request_is_not_chosen(tmp_path: Path) -> None:
    settings = learn(tmp_path / "settings.json", Settings(), "math", "qwen-0.5b", "asked")
    long = Needs(tokens=12_000, reply=512)  # more than the 0.5B's context here, within the 1.5B's
    small, large = PAIR
    pair = [replace(small, context=8192), large]
    assert choose(SUM, long, pair, preferred=preferred(settings)).model == "qwen-1.5b"


def test_forget_one_kind_or_all(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    settings = learn(path, Settings(), "math", "qwen-0.5b", "asked")
    settings = learn(path, settings, "code", "qwen-1.5b", "regenerated")
    assert [i.kind for i in learned(load_settings(path))] == ["math", "code"]
    settings = forget(path, settings, "math")
    assert preferred(load_settings(path)) == {"code": "qwen-1.5b"}
    forget(path, settings)
    assert load_settings(path).auto_learned == {}


def test_an_unknown_kind_is_refused_with_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not know the kind of task 'poetry'"):
        learn(tmp_path / "settings.json", Settings(), "poetry", "qwen-0.5b", "asked")
    assert not (tmp_path / "settings.json").exists()


def test_entries_cove_did_not_write_are_left_out_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "last_model": "auto",
                "auto_learned": {
                    "math": {"model": "qwen-0.5b", "how": "asked", "when": "2026-12-07T08:00:00+00:00"},
                    "code": {"model": ""},
                    "fact": "qwen-1.5b",
                    "poetry": {"model": "qwen-1.5b"},
                },
            }
        )
    )
    loaded = read_settings(path)
    assert loaded.notice is None and loaded.settings.last_model == "auto"
    assert preferred(loaded.settings) == {"math": "qwen-0.5b"}  # "poetry" is kept in the file but not a kind Auto uses


def test_a_regenerated_reply_counts_only_with_another_model() -> None:
    choice = choose(SUM, ASK, PAIR).record()
    assert alternatives(choice) == ["qwen-0.5b"]
    assert kept_regeneration({"auto": choice}) is None  # Auto's own choice: nothing to learn
    again = regeneration_params(choice, "qwen-0.5b")
    assert again["why"] == "you asked for it instead of qwen-1.5b" and again["kind"] == "math"
    assert kept_regeneration({"auto": again}) == ("math", "qwen-0.5b")
    assert alternatives(again) == ["qwen-1.5b"]  # and back again
    assert kept_regeneration({"auto": regeneration_params(choice, "qwen-1.5b")}) is None
    assert kept_regeneration({"temperature": 0.7}) is None and kept_regeneration(None) is None


def test_a_base_model_is_offered_only_when_no_chat_model_could_serve() -> None:
    base = replace(PAIR[0], name="gemma-base", tools="")
    choice = choose(SUM, ASK, [*PAIR, base]).record()
    assert choice["able"] == ["qwen-0.5b", "qwen-1.5b"] and alternatives(choice) == ["qwen-0.5b"]
    alone = choose(SUM, ASK, [base]).record()
    assert alone["chosen"] == "gemma-base" and alone["able"] == ["gemma-base"]
