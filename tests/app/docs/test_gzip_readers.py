"""gzip-compressed text, Markdown, HTML and code (Debian's "changelog.html.gz"): named as such they
are read as what they hold, a damaged or cut-short one gets a sentence, and one that unpacks past
the limit (a gzip bomb) is refused part way with bounded memory."""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

import pytest

from app.docs.readers import SUFFIXES, Unreadable, is_supported, read_sections
from app.docs.readers.gzipped import DAMAGED, gunzipped
from app.docs.readers.limits import Budget
from app.docs.readers.text import read_text

pytestmark = pytest.mark.timeout(120)

PAGE = (
    "<html><head><title>Changelog</title></head><body><h1>Python News</h1>"
    "<h2>Library</h2><p>The gzip module reads members one after another.</p>"
    "<h2>Tests</h2><p>Pelicans nest on the harbour wall.</p></body></html>"
)


def gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


def problem(path: Path) -> str:
    with pytest.raises(Unreadable) as caught:
        for _ in read_sections(path):
            pass
    return str(caught.value)


def test_names_with_gz_after_a_text_suffix_are_read_and_others_are_not() -> None:
    for name in ("changelog.html.gz", "a.HTM.GZ", "notes.txt.gz", "README.md.gz", "intro.rst.gz", "tool.py.gz"):
        assert is_supported(Path(name)), name
    for name in ("report.pdf.gz", "manual.docx.gz", "archive.tar.gz", "data.gz", "photo.jpg.gz"):
        assert not is_supported(Path(name)), name
    assert {".html.gz", ".htm.gz", ".txt.gz", ".md.gz", ".rst.gz"} <= SUFFIXES
    assert ".pdf.gz" not in SUFFIXES and ".docx.gz" not in SUFFIXES and ".gz" not in SUFFIXES


def test_html_gz_is_read_as_html_with_its_headings(tmp_path: Path) -> None:
    sections = list(read_sections(gz(tmp_path / "changelog.html.gz", PAGE.encode())))
    by_heading = {s.heading: s.text for s in sections}
    assert "Pelicans nest on the harbour wall." in by_heading["Python News > Tests"]
    assert "members one after another" in by_heading["Python News > Library"]
    assert all("Changelog" not in s.text for s in sections)  # the title, left out as in a plain .html


def test_txt_md_and_code_gz_read_as_their_plain_kinds(tmp_path: Path) -> None:
    text = "First paragraph about gannets.\r\n\r\nSecond one, ünïcödé.\n" * 3_000
    assert "".join(s.text for s in read_sections(gz(tmp_path / "notes.txt.gz", text.encode()))) == text
    markdown = "# Guide\n\nIntro.\n\n## Install\n\nRun make.\n"
    found = list(read_sections(gz(tmp_path / "README.md.gz", markdown.encode())))
    assert [s.heading for s in found] == ["Guide", "Guide > Install"]
    source = "import os\n\ndef load(x):\n    return x\n"
    assert [s.heading for s in read_sections(gz(tmp_path / "tool.py.gz", source.encode()))] == [None, "load"]


def test_a_gz_of_several_members_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "joined.txt.gz"
    path.write_bytes(gzip.compress(b"one member\n") + gzip.compress(b"and another\n"))
    assert "".join(s.text for s in read_sections(path)) == "one member\nand another\n"


def test_a_cut_short_or_damaged_gz_gets_one_sentence(tmp_path: Path) -> None:
    whole = gzip.compress(("A line about the tide tables.\n" * 20_000).encode())
    (tmp_path / "cut.txt.gz").write_bytes(whole[: len(whole) // 2])
    assert problem(tmp_path / "cut.txt.gz") == DAMAGED
    flipped = bytearray(whole)
    flipped[len(flipped) // 2] ^= 0xFF
    (tmp_path / "flipped.txt.gz").write_bytes(bytes(flipped))
    assert problem(tmp_path / "flipped.txt.gz") == DAMAGED
    (tmp_path / "plain.html.gz").write_text(PAGE)  # named .gz, not gzip at all
    assert problem(tmp_path / "plain.html.gz") == DAMAGED
    (tmp_path / "empty.md.gz").write_bytes(b"")
    assert problem(tmp_path / "empty.md.gz") == DAMAGED
    (tmp_path / "report.pdf.gz").write_bytes(gzip.compress(b"%PDF-1.4"))
    assert problem(tmp_path / "report.pdf.gz") == "is a .pdf.gz file, which Cove does not read"
    assert DAMAGED == "is not a readable gzip file (it is damaged or cut short)"


def test_a_gzip_bomb_of_zeros_is_refused_at_its_first_block(tmp_path: Path) -> None:
    """200 MB of zeros packs to about 200 KB; the reader unpacks a block, sees binary, and stops."""
    path = tmp_path / "bomb.txt.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        block = bytes(1024**2)
        for _ in range(200):
            out.write(block)
    assert path.stat().st_size < 400 * 1024
    tracemalloc.start()
    try:
        sentence = problem(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sentence == "looks like a binary file, not text"
    assert peak < 8 * 1024**2, peak


def test_text_that_unpacks_past_the_limit_is_refused_one_byte_past_it(tmp_path: Path) -> None:
    text = b"The schooner Marigold paid its dues at berth nine.\n\n" * 100_000  # 5.2 MB, packs to ~30 KB
    data = gzip.compress(text)
    limit = 1024**2
    given = []
    with gunzipped(io.BytesIO(data), limit=limit) as unpacked:
        with pytest.raises(Unreadable) as caught:
            for section in read_text(unpacked, Path("ledger.txt"), Budget()):
                given.append(section)
        with pytest.raises(Unreadable):  # nothing more is handed out past the limit
            unpacked.read(10)
    assert str(caught.value) == "unpacks to more than 1 MB; files over 1 MB unpacked are left out"
    assert given and 0 < sum(len(s.text) for s in given) <= limit
    with gunzipped(io.BytesIO(data), limit=len(text)) as unpacked:  # at the limit: read whole
        assert "".join(s.text for s in read_text(unpacked, Path("ledger.txt"), Budget())) == text.decode()
