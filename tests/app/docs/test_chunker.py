"""The chunker: cuts on paragraphs within the size, a small overlap, offsets that point into the
file's text, hashes of the text, and never a chunk across two headings or pages."""

from __future__ import annotations

import hashlib

import pytest

from app.docs.chunker import chunk_sections
from app.docs.types import Section


def paragraphs(n: int, words: int = 30) -> str:
    return "\n\n".join(" ".join(f"w{p}x{i}" for i in range(words)) + "." for p in range(n))


def test_offsets_hashes_and_size() -> None:
    text = paragraphs(40)
    chunks = list(chunk_sections([Section(text, 0)], size=500, overlap=80))
    assert len(chunks) > 5
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert len(c.text) <= 500
        assert c.hash == hashlib.sha256(c.text.encode()).hexdigest()
        assert c.text == c.text.strip()
    # Cuts fall on paragraph ends: every chunk ends with a paragraph's full stop.
    assert all(c.text.endswith(".") for c in chunks)
    # Everything is covered, in order, with a small overlap between neighbours.
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.start < b.start <= a.end
        assert a.end - b.start <= 80


def test_headings_and_pages_are_never_mixed() -> None:
    one = "Intro text. " * 10
    two = "Install text. " * 10
    three = "Page two text. " * 10
    sections = [
        Section(one, 0, heading="Intro"),
        Section(two, len(one), heading="Intro > Install"),
        Section(three, len(one) + len(two), page=2, heading="Intro > Install"),
    ]
    chunks = list(chunk_sections(sections, size=1000, overlap=100))
    assert [(c.heading, c.page) for c in chunks] == [("Intro", None), ("Intro > Install", None), ("Intro > Install", 2)]
    assert chunks[1].start == len(one) and chunks[1].text == two.strip()


def test_contiguous_sections_of_one_heading_are_joined_and_a_long_run_streams() -> None:
    text = paragraphs(400)  # ~100 kB in many sections of one heading
    pieces, pos = [], 0
    while pos < len(text):
        pieces.append(Section(text[pos : pos + 777], pos, heading="H"))
        pos += 777
    chunks = list(chunk_sections(pieces, size=1000, overlap=150))
    for c in chunks:
        assert text[c.start : c.end] == c.text and c.heading == "H" and len(c.text) <= 1000
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(a.start < b.start <= a.end for a, b in zip(chunks, chunks[1:], strict=False))
    assert len(chunks) < len(text) // 500  # joined across sections, not one chunk per piece


def test_no_break_at_all_cuts_hard_and_blank_text_gives_nothing() -> None:
    word = "x" * 2500
    chunks = list(chunk_sections([Section(word, 10)], size=1000, overlap=100))
    assert "".join(c.text for c in chunks) == word and chunks[0].start == 10
    assert list(chunk_sections([Section("   \n\n  ", 0), Section("", 7)])) == []


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        list(chunk_sections([Section("x", 0)], size=100, overlap=90))
