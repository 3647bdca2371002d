"""The Generation a caller consumes: polling it without waiting (what the window does each frame)."""

from __future__ import annotations

from app.engine.generation import FinishedEvent, Generation, TokenEvent


def test_take_ready_returns_what_arrived_without_waiting() -> None:
    gen = Generation("r1", on_cancel=lambda g: None)
    assert gen.take_ready() == []  # nothing yet: returns at once
    gen.add_token("Hel")
    gen.add_token("lo")
    first = gen.take_ready()
    assert [e.text for e in first] == ["Hel", "lo"] and all(isinstance(e, TokenEvent) for e in first)
    assert gen.take_ready() == []
    gen.add_token("!")
    gen.end(None, "complete", {"gen_tokens": 3}, None)
    gen.add_token("late")  # after the end: dropped
    rest = gen.take_ready()
    assert [type(e) for e in rest] == [TokenEvent, FinishedEvent]
    assert rest[-1].text == "Hello!" and rest[-1].status == "complete"
    assert gen.take_ready() == []  # the end is taken once
    assert list(gen) == []  # and iteration agrees: it is over
