"""Full-text search: any query a person can type is safe (never raises), words are found,
and snippets mark what matched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.store.database import close_database, open_database
from app.store.history import History
from app.store.search import quote_query, search_messages

NASTY = [
    "",
    "   ",
    "\t\n",
    '"',
    '""',
    '"unbalanced',
    'foo"',
    "NEAR(",
    "NEAR(a b",
    "*",
    "a*",
    "OR",
    "AND",
    "NOT",
    "a AND",
    "a OR OR b",
    "col:x",
    "content:hello",
    "{content}: x",
    "^start",
    "-minus +plus",
    "(",
    ")",
    "((a)",
    "😀",
    "🦙 llama 🦙",
    "e\u0301",
    "\x00",
    "a\x00b",
    "\ud800",
    "x" * 10_000,
    "word " * 2_000,
    '" NEAR( * OR AND col:x ( ) ^',
]

FTS_BITS = st.sampled_from(
    [
        '"',
        "NEAR(",
        "NEAR",
        "*",
        "OR",
        "AND",
        "NOT",
        "col:x",
        "(",
        ")",
        "^",
        "-",
        "+",
        ":",
        "{",
        "}",
        ",",
        "😀",
        "lighthouse",
        "keeper",
        "'",
        "\\",
        "%",
        "_",
        "\x00",
    ]
)


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    opened = open_database(tmp_path / "cove.db")
    history = History(opened.db)
    conversation = history.create_conversation(title="Lights")
    user = history.add_user_message(conversation.id, "Who keeps the lighthouse at night?")
    reply = history.start_assistant_message(
        conversation.id,
        parent_id=user.id,
        model_name="m",
        model_sha256=None,
        model_quant=None,
        params={},
    )
    history.finish_assistant(reply.id, 'The keeper 🦙 does, said "NEAR(" col:x * OR AND.', status="complete", metrics={})
    yield history
    close_database(opened.db)


def test_quote_query_quotes_every_token() -> None:
    assert quote_query('say "hi" NEAR(') == '"say" """hi""" "NEAR("'
    assert quote_query("  ") == ""


def test_nasty_queries_never_raise(history: History) -> None:
    for query in NASTY:
        hits = search_messages(history.db, query)
        assert isinstance(hits, list), query
        if not query.strip():
            assert hits == [], query


def test_arbitrary_queries_never_raise(history: History) -> None:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.one_of(
            st.text(),
            st.text(alphabet=st.characters(codec="utf-8")),
            st.lists(FTS_BITS, max_size=12).map(" ".join),
            st.lists(FTS_BITS, max_size=12).map("".join),
            st.sampled_from(NASTY),
        ),
        st.integers(min_value=-5, max_value=100),
    )
    def check(query: str, limit: int) -> None:
        hits = search_messages(history.db, query, limit=limit)
        assert len(hits) <= max(limit, 0)

    check()


def test_arbitrary_text_is_stored_and_its_words_are_found(history: History) -> None:
    conversation = history.create_conversation(title="fuzz")

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.text(max_size=200), st.from_regex(r"[a-z]{3,10}", fullmatch=True), st.text(max_size=200))
    def check(before: str, word: str, after: str) -> None:
        message = history.add_user_message(conversation.id, f"{before} {word} {after}")
        hits = search_messages(history.db, word, limit=10_000)
        mine = [hit for hit in hits if hit.message_id == message.id]
        assert len(mine) == 1
        assert f"[{word}]" in mine[0].snippet.lower()
        for query in (before, after, before + after):
            search_messages(history.db, query)

    check()


def test_finds_a_word_with_snippet_and_context(history: History) -> None:
    hits = search_messages(history.db, "lighthouse")
    assert len(hits) == 1
    hit = hits[0]
    assert hit.role == "user"
    assert hit.conversation_title == "Lights"
    assert "[lighthouse]" in hit.snippet
    assert hit.snippet == "Who keeps the [lighthouse] at night?"


def test_words_are_anded_and_case_insensitive(history: History) -> None:
    assert [h.role for h in search_messages(history.db, "KEEPER")] == ["assistant"]
    assert search_messages(history.db, "keeper lighthouse") == []
    assert [h.role for h in search_messages(history.db, "keeps night")] == ["user"]


def test_operators_are_searched_as_words_not_syntax(history: History) -> None:
    hits = search_messages(history.db, '"NEAR(" col:x')
    assert [h.role for h in hits] == ["assistant"]
    assert search_messages(history.db, "OR") and search_messages(history.db, "AND")


def test_limit(history: History) -> None:
    conversation = history.create_conversation()
    for n in range(5):
        history.add_user_message(conversation.id, f"repeat repeat {n}")
    assert len(search_messages(history.db, "repeat", limit=3)) == 3
    assert search_messages(history.db, "repeat", limit=0) == []
