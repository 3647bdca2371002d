"""The PDF reader on real PDFs (reportlab): PDFium extracts, one Section per page in order, the
scanned, encrypted and damaged sentences, the page callback, the time cut between pages, PDFium's
quirks normalised, pypdf reading what PDFium cannot open, and PDFium called under its lock from
several threads."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from app.docs.readers import Unreadable, pdf_pdfium, read_sections
from app.docs.readers.limits import Budget, Cut, Limits
from app.docs.readers.pdf import DAMAGED, ENCRYPTED, SCANNED
from app.docs.types import Section
from tests.support.docs_corpus import _encrypted, _pdf

pytestmark = pytest.mark.timeout(120)

PAGES = [
    [f"Page {n} tells of the {word} on the harbour wall."]
    for n, word in enumerate(["gannets", "pelicans", "herons", "terns", "puffins"], 1)
]


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def problem(path: Path) -> str:
    with pytest.raises(Unreadable) as caught:
        for _ in read_sections(path):
            pass
    return str(caught.value)


@pytest.fixture
def pdfium_pages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pages PDFium extracted (0-based), in order."""
    seen: list[int] = []
    original = pdf_pdfium.Document.page_text

    def counting(self: pdf_pdfium.Document, index: int) -> str:
        seen.append(index)
        return original(self, index)

    monkeypatch.setattr(pdf_pdfium.Document, "page_text", counting)
    return seen


def test_pages_come_in_order_one_section_each_extracted_by_pdfium(tmp_path: Path, pdfium_pages: list[int]) -> None:
    found = list(read_sections(write(tmp_path, "birds.pdf", _pdf(PAGES))))
    assert [s.page for s in found] == [1, 2, 3, 4, 5]
    for section, lines in zip(found, PAGES, strict=True):
        assert section.text == lines[0] + "\n\n"
    assert [s.start for s in found] == [sum(len(s.text) for s in found[:i]) for i in range(5)]
    assert pdfium_pages == [0, 1, 2, 3, 4]


def test_a_scan_and_an_empty_page(tmp_path: Path) -> None:
    assert problem(write(tmp_path, "scan.pdf", _pdf([[], [], []], shapes=True))) == SCANNED
    mixed = list(read_sections(write(tmp_path, "mixed.pdf", _pdf([["Words on one."], [], ["Words on three."]]))))
    assert [(s.page, s.text) for s in mixed] == [(1, "Words on one.\n\n"), (3, "Words on three.\n\n")]


def test_a_user_password_is_not_asked_for_and_an_owner_only_one_is_opened(tmp_path: Path, pdfium_pages: list[int]) -> None:
    assert problem(write(tmp_path, "locked.pdf", _encrypted(_pdf(PAGES)))) == ENCRYPTED
    assert pdfium_pages == []
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf(PAGES))))
    writer.encrypt(user_password="", owner_password="owner-only", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    found = list(read_sections(write(tmp_path, "owner.pdf", out.getvalue())))
    assert [s.text.strip() for s in found] == [lines[0] for lines in PAGES]
    assert pdfium_pages == [0, 1, 2, 3, 4]  # PDFium opened it with the empty user password too


def test_damaged_pdfs_get_a_sentence(tmp_path: Path) -> None:
    assert problem(write(tmp_path, "text.pdf", b"This is not a PDF at all.\n" * 40)) == DAMAGED
    assert problem(write(tmp_path, "empty.pdf", b"")) == DAMAGED
    data = _pdf(PAGES)
    assert problem(write(tmp_path, "head.pdf", data[:200])) == DAMAGED
    for n, cut in enumerate(range(len(data) // 4, len(data), len(data) // 7)):
        path = write(tmp_path, f"cut{n}.pdf", data[:cut])
        try:
            found = list(read_sections(path))
        except Unreadable as exc:
            assert "\n" not in str(exc) and str(exc).startswith("is damaged")
        else:
            assert all(s.text.strip() and s.page for s in found)


def test_the_page_callback_comes_before_each_page_with_the_count(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    seen_when_given: dict[int, list[tuple[int, int]]] = {}
    path = write(tmp_path, "mixed.pdf", _pdf([["One."], [], ["Three."], ["Four."]]))
    for section in read_sections(path, on_page=lambda number, count: calls.append((number, count))):
        assert section.page is not None
        seen_when_given[section.page] = list(calls)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]  # the empty page 2 too
    assert seen_when_given[1] == [(1, 4)] and seen_when_given[3][-1] == (3, 4)
    calls.clear()
    list(read_sections(write(tmp_path, "note.txt", b"Not a PDF.\n"), on_page=lambda n, c: calls.append((n, c))))
    assert calls == []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_time_is_checked_before_each_page_and_the_pages_before_are_kept(tmp_path: Path) -> None:
    clock = Clock()
    budget = Budget(Limits(seconds=10), clock=clock)

    def on_page(number: int, count: int) -> None:
        if number == 3:
            clock.now = 11.0  # page 3 is read (the clock was looked at before it); page 4 is not

    given: list[Section] = []
    with pytest.raises(Cut) as caught:
        for section in read_sections(write(tmp_path, "birds.pdf", _pdf(PAGES)), budget, on_page=on_page):
            given.append(section)
    assert str(caught.value) == (
        "was cut at page 4 of 5: reading it took longer than 10 seconds, the limit for one file; what came before is indexed"
    )
    assert [s.page for s in given] == [1, 2, 3]


def test_a_page_whose_content_passes_the_unpacked_limit_is_cut_before_pdfium_reads_it(tmp_path: Path, pdfium_pages: list[int]) -> None:
    lines = [f"Line {i} of the long ledger with schooners and berths." for i in range(35)]
    budget = Budget(Limits(decoded_bytes=4_000))
    given = []
    with pytest.raises(Cut, match=r"^was cut at page \d of 5: its pages' content unpacks to more than 4 KB"):
        for section in read_sections(write(tmp_path, "ledger.pdf", _pdf([lines] * 5)), budget):
            given.append(section.page)
    assert given and pdfium_pages == [p - 1 for p in given]  # the page past the limit never reached PDFium


def test_pdfium_quirks_are_normalised() -> None:
    raw = "Chapter 1\r\nThe pack\x02ages are ﬁled and ﬂagged,\r\nsoft\x14 hyphens\x15 gone\x00.\r\n"
    assert pdf_pdfium.text(raw) == "Chapter 1\nThe packages are filed and flagged,\nsoft hyphens gone.\n"


def test_a_pdf_pdfium_cannot_open_is_read_by_pypdf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pdfium_pages: list[int]) -> None:
    def refuse(self: pdf_pdfium.Document, file: object) -> None:
        raise pdf_pdfium.PdfiumFailed("Failed to load document (PDFium: Data format error).")

    monkeypatch.setattr(pdf_pdfium.Document, "__init__", refuse)
    found = list(read_sections(write(tmp_path, "birds.pdf", _pdf(PAGES))))
    assert [s.text.strip() for s in found] == [lines[0] for lines in PAGES]
    assert pdfium_pages == []


def test_pdfs_read_from_several_threads_at_once_each_read_whole(tmp_path: Path) -> None:
    paths = [write(tmp_path, f"book{t}.pdf", _pdf([[f"Book {t} page {n} of the ledger."] for n in range(1, 31)])) for t in range(4)]
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def reader(t: int) -> Callable[[], None]:
        def run() -> None:
            try:
                results[t] = [s.text.strip() for s in read_sections(paths[t])]
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=reader(t)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    for t in range(4):
        assert results[t] == [f"Book {t} page {n} of the ledger." for n in range(1, 31)]
