"""A turn's passages: fitted to the context's budget, written into the newest message with the
instruction to cite them, and the reply's citations read back (only real passage numbers)."""

from __future__ import annotations

import pytest

from app.docs.turn_sources import INSTRUCTION, MIN_CUT_CHARS, TurnDocuments, cited_numbers, docs_budget_chars, fit_passages, sources
from app.docs.types import Passage


def passage(i: int, text: str | None = None, page: int | None = None) -> Passage:
    body = text if text is not None else f"Passage number {i} says the harbour opens at {i} o'clock. " * 10
    return Passage(
        chunk_id=i,
        collection="papers",
        path=f"/home/me/docs/file{i}.pdf",
        text=body,
        start=100 * i,
        end=100 * i + len(body),
        hash=f"hash{i}",
        score=1.0 / i,
        page=page,
    )


def test_the_budget_is_a_share_of_the_context_after_the_replys_reserve() -> None:
    assert docs_budget_chars(8192, 512) == int((8192 - 512) * 0.5) * 3
    assert docs_budget_chars(1024, None) == int((1024 - 256) * 0.5) * 3
    assert docs_budget_chars(4096, 100) < docs_budget_chars(8192, 100)


def test_passages_that_fit_are_kept_whole_and_the_first_that_does_not_is_cut_at_a_sentence() -> None:
    ps = [passage(i) for i in range(1, 6)]
    whole = sum(len(p.text) + len(f"[0] {p.path.rsplit('/', 1)[1]}") + 8 for p in ps[:2])
    kept = fit_passages(ps, whole + 300)
    assert [p.chunk_id for p in kept] == [1, 2, 3]
    assert kept[0].text == ps[0].text and kept[1].text == ps[1].text
    cut = kept[2]
    assert ps[2].text.startswith(cut.text) and len(cut.text) < len(ps[2].text) and len(cut.text) >= MIN_CUT_CHARS
    assert cut.text.endswith(".") and cut.end == cut.start + len(cut.text)


def test_nothing_is_taken_past_a_passage_too_big_to_cut_usefully() -> None:
    ps = [passage(1, "x" * 5000), passage(2, "short one.")]
    assert fit_passages(ps, 100) == []


def test_a_budget_counts_bytes_so_wide_characters_do_not_overflow_it() -> None:
    text = "灯台守はカモメを数えた。" * 200  # 3 bytes a character
    kept = fit_passages([passage(1, text)], 3000)
    assert kept and len(kept[0].text.encode()) <= 3000


@pytest.mark.parametrize(
    ("reply", "count", "cited"),
    [
        ("The harbour opens at 6 [2].", 3, {2}),
        ("See [1, 3] and [2][3].", 3, {1, 2, 3}),
        ("As [4] says and [0] and [12]", 3, set()),
        ("No citations here; arrays like x[1] too.", 3, {1}),
        ("[1;2]", 2, {1, 2}),
    ],
)
def test_citations_are_read_as_passage_numbers(reply: str, count: int, cited: set[int]) -> None:
    assert cited_numbers(reply, count) == cited


def test_sources_are_numbered_as_the_prompt_numbered_them_and_marked_cited() -> None:
    given = [passage(1, page=3), passage(2)]
    got = sources(given, "It opens at two [2].")
    assert [(s.n, s.cited, s.path, s.page, s.hash) for s in got] == [
        (1, False, given[0].path, 3, "hash1"),
        (2, True, given[1].path, None, "hash2"),
    ]


def test_apply_puts_the_passages_in_the_newest_message_only_and_follows_up_with_the_earlier_question() -> None:
    asked: list[str] = []

    def search(query: str) -> list[Passage]:
        asked.append(query)
        return [passage(len(asked))]

    docs = TurnDocuments(names=["papers"], search=search, budget_chars=10_000, limit=3)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "When does the harbour open?"},
        {"role": "assistant", "content": "At one."},
        {"role": "user", "content": "And on Sundays?"},
    ]
    out = docs.apply(messages)
    assert out[:3] == messages[:3] and messages[3]["content"] == "And on Sundays?"  # the history's copy is untouched
    assert out[3]["content"].startswith(INSTRUCTION) and out[3]["content"].endswith("Question: And on Sundays?")
    assert "[1] file1.pdf\n" in out[3]["content"] and "[2] file2.pdf\n" in out[3]["content"]
    assert asked == ["And on Sundays?", "When does the harbour open?\nAnd on Sundays?"]
    assert [p.chunk_id for p in docs.given] == [1, 2]


def test_no_passage_found_tells_the_model_to_say_so_and_a_broken_index_leaves_the_prompt_alone() -> None:
    docs = TurnDocuments(names=["papers"], search=lambda q: [], budget_chars=10_000)
    out = docs.apply([{"role": "user", "content": "What is in the box?"}])
    assert "no passage matched" in out[0]["content"] and docs.given == []

    def broken(query: str) -> list[Passage]:
        raise OSError("disk I/O error")

    docs = TurnDocuments(names=["papers"], search=broken, budget_chars=10_000)
    messages = [{"role": "user", "content": "What is in the box?"}]
    assert docs.apply(messages) == messages
    assert docs.problem is not None and "disk I/O error" in docs.problem
