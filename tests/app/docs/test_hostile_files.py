"""Hostile files against a collection (issue 46 cases 7, 8, 10, 11), built here and run through the
real indexer: a DOCX bomb whose main part is not named .xml, a zip whose headers understate its
sizes, PDFs whose pages share one big content stream or draw one big form over and over, a file
read part way when the run stops, a file name that is not UTF-8, and a file swapped for a FIFO
after the folder was walked, and a gzip bomb. Each ends bounded, with a sentence, the rest of the collection
indexed, and nothing hangs."""

from __future__ import annotations

import gzip
import io
import os
import re
import sqlite3
import struct
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, FloatObject, NameObject

from app.docs import indexer
from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.docs.readers import Unreadable, _base, read_sections
from app.docs.readers.limits import Limits
from app.docs.search import search
from app.docs.types import Progress
from app.docs.walk import Found
from tests.support.docs_text import text_rows

pytestmark = pytest.mark.timeout(90)

NOTE = "A small note about pelicans nesting on the harbour wall.\n"


def collection(tmp_path: Path, *files: tuple[str | bytes, bytes]) -> tuple[Path, Path]:
    """A folder with note.txt and `files` (name, content), made a collection named "c"."""
    docs, db = tmp_path / "docs", tmp_path / "documents.db"
    docs.mkdir()
    (docs / "note.txt").write_text(NOTE)
    for name, data in files:
        with open(os.path.join(os.fsencode(docs), os.fsencode(name)), "wb") as out:
            out.write(data)
    with DocumentIndex(db) as index:
        index.create("c", [docs])
    return docs, db


def problems_of(done: Progress) -> dict[str, str]:
    return {Path(p.path).name: p.sentence for p in done.problems}


def chunk_count(db: Path, name: str) -> int:
    with DocumentIndex(db) as index:
        return int(
            index.conn.execute(
                "SELECT count(*) FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path LIKE ?", (f"%/{name}",)
            ).fetchone()[0]
        )


def assert_note_indexed(db: Path) -> None:
    with DocumentIndex(db) as index:
        found = search(index, ["c"], "pelicans")
        assert found and found[0].path.endswith("note.txt")


# ---- case 7: DOCX ------------------------------------------------------------------------------


def docx_with_main_part(name: str, paragraphs_mb: int) -> bytes:
    """A real .docx whose main part is `name` (so named in [Content_Types].xml and the
    relationships), holding `paragraphs_mb` MB of paragraphs."""
    seed = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("seed")
    document.save(seed)
    source = zipfile.ZipFile(seed)
    para = b"<w:p><w:r><w:t>The harbour ledger lists every schooner, its berth and the dues it paid.</w:t></w:r></w:p>"
    block = para * (1024**2 // len(para))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "word/document.xml":
                head = data.partition(b"<w:body>")[0]
                with archive.open(name, "w") as member:
                    member.write(head + b"<w:body>")
                    for _ in range(paragraphs_mb):
                        member.write(block)
                    member.write(b"</w:body></w:document>")
                continue
            member_name = info.filename.replace("word/_rels/document.xml.rels", f"word/_rels/{Path(name).name}.rels")
            archive.writestr(member_name, data.replace(b"word/document.xml", name.encode()))
    return out.getvalue()


def test_a_docx_bomb_whose_main_part_is_not_named_xml_is_refused_by_its_size(tmp_path: Path) -> None:
    bomb = docx_with_main_part("word/document.bin", 200)
    assert len(bomb) < 2 * 1024**2
    _, db = collection(tmp_path, ("ledger.docx", bomb))
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished
    sentence = problems_of(done)["ledger.docx"]
    assert sentence.startswith("unpacks to 20") and sentence.endswith(" of XML; Word documents over 64 MB unpacked are left out")
    assert chunk_count(db, "ledger.docx") == 0
    assert_note_indexed(db)


def test_a_docx_with_its_main_part_renamed_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "small.docx"
    path.write_bytes(docx_with_main_part("word/document.bin", 1))
    sections = list(read_sections(path))
    assert sections and "harbour ledger" in sections[0].text


def _understate(data: bytes, name: str, size: int) -> bytes:
    """The zip `data` with member `name`'s uncompressed size given as `size` in its local header
    and its central directory entry (the CRC left as it was)."""
    out = bytearray(data)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(name)
    struct.pack_into("<I", out, info.header_offset + 22, size)
    at = info.header_offset + 30 + info.compress_size
    while (at := out.find(b"PK\x01\x02", at + 1)) >= 0:
        length = struct.unpack_from("<H", out, at + 28)[0]
        if bytes(out[at + 46 : at + 46 + length]) == name.encode():
            struct.pack_into("<I", out, at + 24, size)
            return bytes(out)
    raise AssertionError(f"no central directory entry for {name}")


def test_a_docx_whose_zip_understates_its_sizes_unpacks_no_more_than_they_say(tmp_path: Path) -> None:
    """The central directory says the main part is 4 KB; its data inflates to 300 MB. zipfile's
    read() of a part inflates all its data before cutting it at the declared size: the reader
    inflates a block at a time and stops one byte past it, with a sentence."""
    real = docx_with_main_part("word/document.xml", 300)
    path = tmp_path / "liar.docx"
    path.write_bytes(_understate(real, "word/document.xml", 4096))
    assert zipfile.ZipFile(path).getinfo("word/document.xml").file_size == 4096
    tracemalloc.start()
    try:
        with pytest.raises(Unreadable) as caught:
            list(read_sections(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == "is damaged (a part of it unpacks to more than its zip says)"
    assert peak < 32 * 1024**2, peak


def test_a_docx_of_too_many_parts_or_of_another_compression_is_refused(tmp_path: Path) -> None:
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as archive:
        for i in range(10_001):
            archive.writestr(f"word/media/p{i}.xml", b"")
    path = tmp_path / "many.docx"
    path.write_bytes(many.getvalue())
    with pytest.raises(Unreadable, match=r"^has 10,001 parts; Word documents with over 10,000 are left out$"):
        list(read_sections(path))

    # bzip2 and LZMA parts inflate without a bound per read in zipfile; Word writes neither
    real = zipfile.ZipFile(io.BytesIO(docx_with_main_part("word/document.xml", 1)))
    squeezed = io.BytesIO()
    with zipfile.ZipFile(squeezed, "w", zipfile.ZIP_BZIP2) as archive:
        for info in real.infolist():
            archive.writestr(info.filename, real.read(info.filename))
    path.write_bytes(squeezed.getvalue())
    with pytest.raises(Unreadable, match=r"^is damaged or not a Word \(\.docx\) document$"):
        list(read_sections(path))


# ---- case 8: PDF ------------------------------------------------------------------------------


def shared_stream_pdf(pages: int, content: bytes, *, form: bytes | None = None) -> bytes:
    """`pages` pages that all draw one compressed content stream `content` (pypdf's writer), and,
    given `form`, a form XObject /X0 holding it."""
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    page = writer.pages[0]
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    fonts = DictionaryObject({NameObject("/F1"): font})
    resources = DictionaryObject({NameObject("/Font"): fonts})
    if form is not None:
        xobject = DecodedStreamObject()
        xobject.set_data(form)
        encoded = xobject.flate_encode()
        encoded.update(
            {
                NameObject("/Type"): NameObject("/XObject"),
                NameObject("/Subtype"): NameObject("/Form"),
                NameObject("/BBox"): ArrayObject([FloatObject(0), FloatObject(0), FloatObject(612), FloatObject(792)]),
                NameObject("/Resources"): DictionaryObject({NameObject("/Font"): fonts}),
            }
        )
        resources[NameObject("/XObject")] = DictionaryObject({NameObject("/X0"): writer._add_object(encoded)})
    page[NameObject("/Resources")] = resources
    stream = DecodedStreamObject()
    stream.set_data(content)
    page[NameObject("/Contents")] = writer._add_object(stream.flate_encode())
    for _ in range(pages - 1):
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_pdf_whose_pages_share_one_big_content_stream_is_cut_at_the_unpacked_limit(tmp_path: Path) -> None:
    """20,000 pages, each drawing the same 4 MB of content (a line of text, then a long comment):
    read whole that is 80 GB to unpack and parse. It is cut where the pages' content passes 64 MB."""
    content = b"BT /F1 12 Tf 72 700 Td (harbour ledger page) Tj ET\n%"
    content += b"x" * (4 * 1024**2 - len(content) - 1) + b"\n"
    pdf = shared_stream_pdf(20_000, content)
    assert len(pdf) < 1024**2
    _, db = collection(tmp_path, ("ledger.pdf", pdf))
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished
    assert problems_of(done)["ledger.pdf"] == (
        "was cut at page 17 of 20,000: its pages' content unpacks to more than 64 MB, the limit for one file; what came before is indexed"
    )
    assert chunk_count(db, "ledger.pdf") == 16  # one passage for each page read
    with DocumentIndex(db) as index:
        status = index.status("c")
        assert status.files_indexed == 2 and status.pending == 0
        assert [p.sentence for p in status.problems] == [problems_of(done)["ledger.pdf"]]
        q = "SELECT c.page FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path LIKE '%ledger.pdf'"
        assert {int(r[0]) for r in index.conn.execute(q)} == set(range(1, 17))  # every page before the cut
        found = search(index, ["c"], "ledger page", limit=50)
        assert [(p.path.endswith("ledger.pdf"), p.page) for p in found] == [(True, 1)]  # 16 pages of one text: one result
    assert_note_indexed(db)
    again = index_collection(db, "c", lower_priority=False)  # a cut file is not read again until it changes
    assert again.files_total == 0 and "ledger.pdf" in problems_of(again)


def test_a_slow_pdf_is_cut_by_time_with_the_page_it_reached(tmp_path: Path) -> None:
    line = b"BT /F1 12 Tf 72 700 Td (harbour ledger schooner berth dues) Tj ET\n"
    _, db = collection(tmp_path, ("slow.pdf", shared_stream_pdf(2_000, line * 15_000)))
    done = index_collection(db, "c", lower_priority=False, limits=Limits(seconds=2))
    sentence = problems_of(done)["slow.pdf"]
    cut = re.fullmatch(
        r"was cut at page (\d+)(?: of 2,000)?: reading it took longer than 2 seconds, the limit for one file; "
        r"what came before is indexed",
        sentence,
    )
    assert cut, sentence
    page = int(cut.group(1))
    assert 1 <= page < 2_000
    with DocumentIndex(db) as index:
        pages = {int(p) for (p,) in index.conn.execute("SELECT DISTINCT page FROM chunks WHERE page IS NOT NULL")}
    assert pages == set(range(1, page))  # every page before the cut, none after
    assert_note_indexed(db)


def test_a_page_drawing_one_big_form_thousands_of_times_is_cut_part_way_through_it(tmp_path: Path) -> None:
    """One page draws a 4 MB form 5,000 times (pypdf's own cap): half an hour of parsing for one
    page. The clock is looked at while pypdf works through the page, so it ends within the limit."""
    form = b"BT /F1 12 Tf (formtext) Tj ET\n%" + b"x" * 4 * 1024**2 + b"\n"
    content = b"BT /F1 12 Tf 72 700 Td (first words) Tj ET\n" + b"/X0 Do\n" * 5_000
    _, db = collection(tmp_path, ("forms.pdf", shared_stream_pdf(3, content, form=form)))
    done = index_collection(db, "c", lower_priority=False, limits=Limits(seconds=2))
    assert problems_of(done)["forms.pdf"] == (
        "was cut at page 1 of 3: reading it took longer than 2 seconds, the limit for one file; what came before is indexed"
    )
    assert chunk_count(db, "forms.pdf") == 0
    assert_note_indexed(db)


def test_a_text_past_the_character_limit_is_cut_where_it_reached_it(tmp_path: Path) -> None:
    text = "".join(f"Line {i} of the harbour ledger, with its schooner and berth.\n\n" for i in range(20_000))
    _, db = collection(tmp_path, ("ledger.txt", text.encode()))
    done = index_collection(db, "c", lower_priority=False, limits=Limits(characters=100_000))
    sentence = problems_of(done)["ledger.txt"]
    assert sentence.startswith("was cut after ") and "more than 100,000 characters of text" in sentence
    with DocumentIndex(db) as index:
        (end,) = index.conn.execute(
            "SELECT max(\"end\") FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path LIKE '%ledger.txt'"
        ).fetchone()
    assert 50_000 < end <= 100_000


def test_a_gzip_bomb_in_a_collection_is_refused_and_the_rest_indexed(tmp_path: Path) -> None:
    """200 MB of zeros packed to about 200 KB, named like Debian's compressed docs: unpacked a block
    at a time, it is refused at its first block, and an honest .html.gz beside it is read."""
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=9) as out:
        for _ in range(200):
            out.write(bytes(1024**2))
    page = gzip.compress(b"<html><body><h1>News</h1><p>Cormorants dry their wings on the pier.</p></body></html>")
    _, db = collection(tmp_path, ("changelog.txt.gz", bomb.getvalue()), ("news.html.gz", page))
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished
    assert problems_of(done) == {"changelog.txt.gz": "looks like a binary file, not text"}
    with DocumentIndex(db) as index:
        found = search(index, ["c"], "cormorants")
        assert [Path(p.path).name for p in found] == ["news.html.gz"] and found[0].heading == "News"
    assert_note_indexed(db)


# ---- case 8: progress within a file, and the write lock ---------------------------------------------


def big_text(lines: int = 30_000) -> bytes:
    return "".join(f"Entry {i}: the schooner Marigold{i} paid its dues at berth {i % 40}.\n\n" for i in range(lines)).encode()


def test_a_stop_part_way_through_a_file_keeps_what_was_written_and_the_next_run_reads_it_again(tmp_path: Path) -> None:
    _, db = collection(tmp_path, ("ledger.txt", big_text()))
    calls = 0

    def stop_after_three_batches() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3  # asked before ledger.txt (the first file), then after each of its batches

    stopped = index_collection(db, "c", lower_priority=False, should_stop=stop_after_three_batches)
    assert stopped.paused and not stopped.finished
    kept = chunk_count(db, "ledger.txt")
    assert kept == 3 * indexer.WRITE_BATCH
    with DocumentIndex(db) as index:
        assert index.status("c").pending == 2  # ledger.txt part way, note.txt not begun
        assert search(index, ["c"], "Marigold5")[0].path.endswith("ledger.txt")  # what was written is searchable

    resumed = index_collection(db, "c", lower_priority=False)
    assert resumed.finished and resumed.files_total == 2
    with DocumentIndex(db) as index:
        q = index.conn.execute
        assert index.status("c").pending == 0 and index.status("c").files_indexed == 2
        assert q("SELECT count(*) FROM (SELECT file_id, ord FROM chunks GROUP BY 1, 2 HAVING count(*) > 1)").fetchone()[0] == 0
        assert text_rows(index, "c") == q("SELECT count(*) FROM chunks").fetchone()[0]
    assert chunk_count(db, "ledger.txt") > kept


def test_the_index_can_be_written_between_the_batches_of_one_file(tmp_path: Path) -> None:
    """While one large file is read, another writer (a second run, the window) gets the index's
    write lock between its batches; the file's passages so far are already there to read."""
    _, db = collection(tmp_path, ("ledger.txt", big_text()))
    seen: list[tuple[str, int]] = []

    def hold() -> bool:
        other = sqlite3.connect(db, timeout=0)
        try:
            row = other.execute(
                "SELECT f.status, count(c.id) FROM files f LEFT JOIN chunks c ON c.file_id = f.id "
                "WHERE f.path LIKE '%ledger.txt' GROUP BY f.id"
            ).fetchone()
            other.execute("BEGIN IMMEDIATE")  # fails at once ("database is locked") while the indexer holds it
            other.execute("ROLLBACK")
        finally:
            other.close()
        if row is not None:
            seen.append((str(row[0]), int(row[1])))
        return False

    assert index_collection(db, "c", lower_priority=False, hold=hold).finished
    assert any(status == "reading" and chunks > 0 for status, chunks in seen), seen


# ---- case 10: a name that is not UTF-8 ----------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_indexed_and_shown_escaped(tmp_path: Path) -> None:
    raw = b"caf\xe9 \xff.txt"
    docs, db = collection(tmp_path, (raw, b"A note about walruses on the slipway.\n"))
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished and done.files_done == 2 and done.problems == ()
    shown = f"{docs}/caf\\xe9 \\xff.txt"
    with DocumentIndex(db) as index:
        found = search(index, ["c"], "walruses")
        assert [p.path for p in found] == [shown]
        assert index.conn.execute("SELECT raw_path FROM files WHERE path = ?", (shown,)).fetchone()[0] == os.fsencode(docs) + b"/" + raw
        assert index.status("c").files_indexed == 2
    assert_note_indexed(db)
    assert index_collection(db, "c", lower_priority=False).files_total == 0  # found again as the same file

    # A file named like the escaped name itself (backslashes and all) is another file; the index
    # keys files by that text, so of the two the one whose name is UTF-8 is kept.
    (docs / "caf\\xe9 \\xff.txt").write_text("A note about otters.\n")
    done = index_collection(db, "c", lower_priority=False)
    assert problems_of(done) == {
        "caf\\xe9 \\xff.txt": "has a name that is not UTF-8 and reads, escaped, like another file's name beside it, so it is left out"
    }
    with DocumentIndex(db) as index:
        assert not search(index, ["c"], "walruses") and [p.path for p in search(index, ["c"], "otters")] == [shown]
        assert index.conn.execute("SELECT raw_path FROM files WHERE path = ?", (shown,)).fetchone()[0] is None

    os.unlink(os.fsencode(docs) + b"/" + raw)
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished and done.problems == () and done.files_total == 0


# ---- case 11: a file swapped for a FIFO after the walk -----------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_file_swapped_for_a_fifo_after_the_walk_is_skipped_with_a_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, db = collection(tmp_path, ("swapped.txt", b"Plain words about gannets.\n"))
    walk = indexer.walk_roots

    def walk_then_swap(*args: object, **kwargs: object) -> Iterator[Found]:
        found = list(walk(*args, **kwargs))  # type: ignore[arg-type]
        os.unlink(docs / "swapped.txt")
        os.mkfifo(docs / "swapped.txt")  # opened plainly, it would wait for a writer forever
        yield from found

    monkeypatch.setattr(indexer, "walk_roots", walk_then_swap)
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished and done.files_done == 2
    assert problems_of(done) == {
        "swapped.txt": "is no longer a regular file (it became a pipe, device, socket or folder while Cove was indexing), so it is skipped"
    }
    assert_note_indexed(db)


def test_a_file_swapped_for_a_link_after_the_walk_is_skipped_with_a_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk found a regular file; by the time it is read it is a link to a file outside the
    collection. What is opened is not the file that was found: skipped, its target never read."""
    outside = tmp_path / "outside.txt"
    outside.write_text("Secret words about the vault.\n")
    docs, db = collection(tmp_path, ("swapped.txt", b"Plain words about gannets.\n"))
    walk = indexer.walk_roots

    def walk_then_swap(*args: object, **kwargs: object) -> Iterator[Found]:
        found = list(walk(*args, **kwargs))  # type: ignore[arg-type]
        os.unlink(docs / "swapped.txt")
        os.symlink(outside, docs / "swapped.txt")
        yield from found

    monkeypatch.setattr(indexer, "walk_roots", walk_then_swap)
    done = index_collection(db, "c", lower_priority=False)
    assert done.finished
    assert problems_of(done) == {"swapped.txt": "was replaced by another file or a link while Cove was indexing, so it is skipped"}
    with DocumentIndex(db) as index:
        assert not search(index, ["c"], "vault")
    assert_note_indexed(db)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_reader_looks_again_at_what_it_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path was a regular file when it was looked at and is a FIFO when it is opened: the
    open does not wait for a writer, and what was opened is refused."""
    regular = tmp_path / "regular.txt"
    regular.write_text("words\n")
    before = os.stat(regular)
    os.mkfifo(tmp_path / "swapped.txt")

    class StaleStat:  # os, except that stat() answers what the path was before the swap
        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        def stat(self, path: object) -> os.stat_result:
            return before

    monkeypatch.setattr(_base, "os", StaleStat())
    with pytest.raises(Unreadable) as caught:
        list(read_sections(tmp_path / "swapped.txt"))
    assert str(caught.value) == "is not a regular file"
