"""The engine's side of document passages: with the model's own token counts, the most passages
that fit are kept (best first), the rest left out, and the count reported."""

from __future__ import annotations

import pytest

from app.context_policy import ContextOverflow
from app.docs.turn_sources import passage_parts
from app.docs.types import Passage
from app.engine.passage_fit import compose, fit_passages


def passage(i: int, size: int) -> Passage:
    return Passage(
        chunk_id=i, collection="c", path=f"/d/f{i}.txt", text=f"passage {i} " + "w" * size, start=0, end=size, hash=f"h{i}", score=1.0
    )


def fit_under(limit: int):
    """A fit that takes messages whose text is at most `limit` characters (a stand-in tokenizer)."""
    seen: list[list[dict]] = []

    def fit(messages: list[dict]) -> int:
        seen.append(messages)
        n = sum(len(m["content"]) for m in messages)
        if n > limit:
            raise ContextOverflow(n, limit, 0)
        return n

    return fit, seen


def messages_with(n: int, size: int) -> list[dict]:
    parts = passage_parts("What is it?", [passage(i, size) for i in range(1, n + 1)], ["c"])
    return [{"role": "system", "content": "sys"}, {"role": "user", "content": "(all of them)", "passages": parts}]


def test_everything_fits_and_the_count_is_all_of_them() -> None:
    fit, seen = fit_under(100_000)
    got, kept = fit_passages(messages_with(4, 100), fit)
    assert kept == 4 and len(seen) == 1
    assert "passages" not in seen[0][1] and "[4] f4.txt" in seen[0][1]["content"]


@pytest.mark.parametrize("room", [1, 2, 3])
def test_the_most_passages_that_fit_are_kept_best_first(room: int) -> None:
    messages = messages_with(5, 300)
    parts = messages[1]["passages"]
    limit = len("sys") + len(compose(parts, room)) + 5
    fit, seen = fit_under(limit)
    got, kept = fit_passages(messages, fit)
    assert kept == room
    assert got == len("sys") + len(compose(parts, room))


def test_none_fit_says_so_with_the_question_and_too_little_room_even_then_raises() -> None:
    messages = messages_with(3, 500)
    parts = messages[1]["passages"]
    fit, _ = fit_under(len("sys") + len(compose(parts, 0)) + 1)
    _, kept = fit_passages(messages, fit)
    assert kept == 0 and compose(parts, 0).endswith("Question: What is it?")
    tiny, _ = fit_under(10)
    with pytest.raises(ContextOverflow):
        fit_passages(messages, tiny)


def test_messages_without_passages_are_fitted_as_they_are() -> None:
    fit, seen = fit_under(1000)
    plain = [{"role": "user", "content": "hi"}]
    assert fit_passages(plain, fit) == (2, None) and seen == [plain]
