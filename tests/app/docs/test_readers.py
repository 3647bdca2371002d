"""The readers on real files: every kind in the corpus gives its known sentences in the right
file, page and heading; every bad case of issue 33 point 2 gets its one sentence; encodings;
offsets laid end to end; memory stays bounded on a large file; damaged files never give a
traceback."""

from __future__ import annotations

import gc
import io
import os
import random
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from app.docs.readers import MAX_BYTES, SUFFIXES, Unreadable, is_supported, read_sections
from app.docs.readers.code import code_sections
from app.docs.readers.docx import MAX_MARKUP
from app.docs.readers.markdown import lines, markdown_sections
from app.docs.types import Section
from tests.support.docs_corpus import HIDDEN_SCRIPT, HUGE_SIZE, Corpus, _pdf, without_file_override, write_corpus

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def sections(path: Path) -> list[Section]:
    return list(read_sections(path))


def problem(path: Path) -> str:
    with pytest.raises(Unreadable) as caught:
        for _ in read_sections(path):
            pass
    return str(caught.value)


def assert_laid_end_to_end(found: list[Section]) -> None:
    at = 0
    for section in found:
        assert section.start == at
        at += len(section.text)


# --- the corpus: good files -------------------------------------------------------------------


def test_every_fact_is_in_its_file_page_and_heading(corpus: Corpus) -> None:
    assert len(corpus.facts) >= 10
    for fact in corpus.facts:
        found = sections(corpus.root / fact.path)
        holding = [s for s in found if fact.text in " ".join(s.text.split())]
        assert len(holding) == 1, (fact, found)
        assert (holding[0].page, holding[0].heading) == (fact.page, fact.heading), fact


def test_every_good_file_reads_with_offsets_laid_end_to_end(corpus: Corpus) -> None:
    for path in corpus.good:
        found = sections(path)
        assert found and all(s.text for s in found), path
        assert_laid_end_to_end(found)


def test_the_corpus_is_quick_to_write_and_its_large_file_sparse(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path)
    huge = tmp_path / "bad/huge.txt"
    assert huge.stat().st_size == HUGE_SIZE and huge.stat().st_blocks == 0
    assert {p.relative_to(tmp_path).as_posix() for p in corpus.files} >= set(corpus.bad)
    assert write_corpus(tmp_path / "good", bad=False).bad == {}


def test_a_pdf_gives_a_section_per_page_numbered_from_one(corpus: Corpus) -> None:
    found = sections(corpus.root / "report.pdf")
    assert [s.page for s in found] == [1, 2, 3, 4]
    assert "417 gulls" in found[2].text


def test_html_leaves_out_script_style_and_title(corpus: Corpus) -> None:
    text = "".join(s.text for s in sections(corpus.root / "garden.html"))
    assert HIDDEN_SCRIPT not in text and "color: green" not in text and "Garden notes" not in text
    assert "Runner beans climb.\n\nBroad beans do not." in text


def test_docx_tables_are_read_in_order(corpus: Corpus) -> None:
    text = "".join(s.text for s in sections(corpus.root / "manual.docx"))
    assert "Colour | Code\nCobalt blue | CB-7" in text
    assert text.index("Filling") < text.index("Warranty") < text.index("Cobalt")


# --- the bad cases of point 2 ------------------------------------------------------------------


def test_every_bad_file_gets_its_one_sentence(corpus: Corpus) -> None:
    assert set(corpus.bad) >= {
        "bad/scanned.pdf",
        "bad/locked.pdf",
        "bad/corrupt.pdf",
        "bad/huge.txt",
        "bad/binary.txt",
        "bad/loop-a.txt",
        "bad/corrupt.docx",
    }
    for relative, expected in corpus.bad.items():
        sentence = problem(corpus.root / relative)
        assert expected in sentence, relative
        assert "\n" not in sentence and "Traceback" not in sentence and str(corpus.root) not in sentence


def test_a_file_over_the_limit_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    for name in ("big.txt", "big.pdf", "big.md", "big.html", "big.docx", "big.py"):
        path = tmp_path / name
        path.write_bytes(b"")
        os.truncate(path, HUGE_SIZE)
        assert problem(path) == "is 2.0 GB; files over 512 MB are left out", name
    os.truncate(tmp_path / "big.txt", MAX_BYTES + 100 * 1024**2)
    assert problem(tmp_path / "big.txt") == "is 612 MB; files over 512 MB are left out"
    os.truncate(tmp_path / "big.txt", MAX_BYTES)  # at the limit: read (its NULs make it binary)
    assert problem(tmp_path / "big.txt") == "looks like a binary file, not text"


def test_a_docx_that_unpacks_past_the_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    block = bytes(8 * 1024**2)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("word/document.xml", "w", force_zip64=True) as member,
    ):
        for _ in range(MAX_MARKUP // len(block) + 1):
            member.write(block)
    assert path.stat().st_size < 2 * 1024**2
    assert problem(path) == "unpacks to 72 MB of XML; Word documents over 64 MB unpacked are left out"


def test_an_encrypted_docx_or_an_old_doc_says_so(tmp_path: Path) -> None:
    path = tmp_path / "secret.docx"
    path.write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + bytes(4096))
    assert "encrypted with a password, or is an old Word (.doc) file" in problem(path)


def test_a_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf([["Open to all readers."]]))))
    writer.encrypt(user_password="", owner_password="owner-only", algorithm="AES-128")
    path = tmp_path / "owner.pdf"
    with open(path, "wb") as out:
        writer.write(out)
    assert "Open to all readers." in sections(path)[0].text


def test_a_pdf_with_text_on_some_pages_skips_the_empty_ones(tmp_path: Path) -> None:
    path = tmp_path / "mixed.pdf"
    path.write_bytes(_pdf([["First page words."], [], ["Third page words."]]))
    assert [(s.page, s.text.strip()) for s in sections(path)] == [(1, "First page words."), (3, "Third page words.")]


@pytest.mark.parametrize("kind", ["report.pdf", "manual.docx"])
def test_damaged_copies_give_sections_or_a_sentence_never_a_traceback(corpus: Corpus, tmp_path: Path, kind: str) -> None:
    original = (corpus.root / kind).read_bytes()
    chance = random.Random(33)
    sentences = set()
    for n in range(16):
        data = bytearray(original)
        if n % 2:
            data = data[: chance.randrange(len(data))]
        else:
            for _ in range(8):
                at = chance.randrange(len(data))
                data[at : at + 16] = bytes(chance.randrange(256) for _ in range(16))
        path = tmp_path / f"{n}{Path(kind).suffix}"
        path.write_bytes(bytes(data))
        try:
            assert_laid_end_to_end(sections(path))
        except Unreadable as exc:
            sentences.add(str(exc))
    assert sentences  # some of them do not read
    assert all("\n" not in s for s in sentences)


def test_an_unreadable_file_says_permission_denied(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    path = folder / "secret.txt"
    path.write_text("Private words.\n")
    path.chmod(0)
    script = (
        "import sys\nfrom pathlib import Path\nfrom app.docs.readers import Unreadable, read_sections\n"
        "try:\n    list(read_sections(Path(sys.argv[1])))\nexcept Unreadable as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        without_file_override([sys.executable, "-c", script, str(path)]),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cannot be read (permission denied)"


def test_links_folders_fifos_and_missing_files_get_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "self.txt").symlink_to("self.txt")
    assert problem(tmp_path / "self.txt") == "is a symbolic link that loops back on itself"
    (tmp_path / "dangling.md").symlink_to("nowhere.md")
    assert problem(tmp_path / "dangling.md") == "is gone (moved or deleted, or a link to nothing)"
    (tmp_path / "folder.txt").mkdir()
    assert problem(tmp_path / "folder.txt") == "is a folder, not a file"
    os.mkfifo(tmp_path / "pipe.txt")  # opening it would wait for a writer forever
    assert problem(tmp_path / "pipe.txt") == "is not a regular file"
    (tmp_path / "picture.png").write_bytes(b"\x89PNG")
    assert problem(tmp_path / "picture.png") == "is a .png file, which Cove does not read"


# --- encodings and binary text -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("utf-8", "Plain ASCII and ünïcödé, 日本語 too.\n"),
        ("utf-8-sig", "UTF-8 with a BOM: Ærøskøbing.\n"),
        ("utf-16", "UTF-16 with a BOM: Gdańsk, Łódź, 東京.\n"),
        ("utf-16-le", "UTF-16 without a BOM, mostly ASCII text: café.\n" * 4),
        ("utf-32", "UTF-32 with a BOM: Zürich.\n"),
        ("latin-1", "Le café de Mère Lucienne ouvre à sept heures. Les élèves arrivent tôt.\n"),
        ("cp1252", "The “curly” quotes — and the € sign — from Windows.\n" * 3),
        ("cp1251", "Привет, как дела? Сегодня хорошая погода в Москве.\n"),
    ],
)
def test_encodings_are_found(tmp_path: Path, encoding: str, text: str) -> None:
    path = tmp_path / "words.txt"
    path.write_bytes(text.encode(encoding))
    assert "".join(s.text for s in sections(path)) == text


def test_text_across_blocks_and_line_ends_is_reproduced_exactly(tmp_path: Path) -> None:
    # Over 6 MB: 2-byte characters fall across block boundaries; CRLF and CR line ends are kept.
    paragraph = "Ligne un é\r\nline two\rline three ü\n\n"
    text = "x" + paragraph * 200_000
    path = tmp_path / "long.txt"
    path.write_bytes(text.encode("utf-8"))
    found = sections(path)
    assert "".join(s.text for s in found) == text
    assert_laid_end_to_end(found)
    assert len(found) > 100 and max(len(s.text) for s in found) <= 32_000


def test_a_file_without_line_breaks_is_cut_anyway(tmp_path: Path) -> None:
    path = tmp_path / "one-line.txt"
    path.write_text("word " * 50_000)
    found = sections(path)
    assert len(found) > 1 and "".join(s.text for s in found) == "word " * 50_000


@pytest.mark.parametrize(
    "data",
    [
        b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64,  # NUL bytes
        bytes(range(1, 32)) * 500,  # control characters, no NUL
        random.Random(5).randbytes(20_000).replace(b"\x00", b"\x01"),  # no NUL; charset-normalizer finds no encoding
    ],
)
def test_binary_named_as_text_is_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "program.txt"
    path.write_bytes(data)
    assert problem(path) == "looks like a binary file, not text"


def test_binary_after_a_text_beginning_is_refused_part_way(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"A text beginning.\n\n" * 60_000 + bytes(4096))
    given = []
    with pytest.raises(Unreadable, match="looks like a binary file"):
        for section in read_sections(path):
            given.append(section)
    assert given


_PARAGRAPH = "The quick brown fox jumps over the lazy dog near the riverbank. " * 12
_LARGE = {  # suffix: (a repeated piece of about 1 KB to 2 KB, MB written)
    ".txt": (_PARAGRAPH + "\n\n", 100),
    ".md": ("## A heading\n\n" + _PARAGRAPH + "\n\n- a list item\n\n", 16),
    ".py": ("def handler():\n    return '" + _PARAGRAPH + "'\n\n\n", 16),
    ".html": ("<h2>A heading</h2><p>" + _PARAGRAPH + "<b>bold</b> &amp; more</p>\n", 6),  # html.parser is slower
}


@pytest.mark.parametrize("suffix", list(_LARGE))
def test_memory_stays_bounded_reading_a_large_file(tmp_path: Path, suffix: str) -> None:
    piece, megabytes = _LARGE[suffix]
    path = tmp_path / f"large{suffix}"
    block = (piece * (1024**2 // len(piece) + 1)).encode()
    with open(path, "wb") as out:
        for _ in range(megabytes):
            out.write(block)
    tracemalloc.start()
    try:
        characters = count = 0
        for section in read_sections(path):
            characters += len(section.text)
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count > megabytes * 30 and characters > 0.9 * path.stat().st_size
    if suffix == ".txt":
        assert characters == path.stat().st_size
    assert peak < 4 * 1024**2, peak  # a few blocks, not the whole file


def test_memory_held_while_reading_a_pdf_grows_little_with_its_pages(tmp_path: Path) -> None:
    # pypdf keeps every object it parses; the reader drops them after each page, so the memory
    # held from page 20 to page 80 grows by little (about 7 KB a page when they are kept).
    line = "The lighthouse keeper counted gulls before the storm reached Harrow Point again."
    path = tmp_path / "long.pdf"
    path.write_bytes(_pdf([[f"{n} {line}"] * 40 for n in range(80)]))
    held = {}
    tracemalloc.start()
    try:
        for section in read_sections(path):
            if section.page in (20, 80):
                gc.collect()  # pypdf's objects hold cycles: what is garbage goes before the count
            held[section.page] = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(held) == 80
    assert (held[80] - held[20]) / 60 < 2 * 1024, (held[20], held[80])


def test_an_html_page_names_its_own_charset(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    text = "Zażółć gęślą jaźń"
    path.write_bytes(
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-2"></head>'
        f"<body><p>{text}</p></body></html>".encode("iso-8859-2")
    )
    assert [s.text for s in sections(path)] == [text]


# --- headings ----------------------------------------------------------------------------------


def test_markdown_heading_paths() -> None:
    source = (
        "Before any heading.\n\n# Guide\n\nIntro.\n\nInstall\n=======\n\n## From source ##\n\nsteps\n\n"
        "```\n# a comment, not a heading\n```\n\n### Linux\n\nmake\n\nUsage\n-----\n\nrun it\n\n---\n\nafter a rule\n"
    )
    found = list(markdown_sections(lines(iter([source[:37], source[37:]]))))
    assert [s.heading for s in found] == [
        None,
        "Guide",
        "Install",
        "Install > From source",
        "Install > From source > Linux",
        "Install > Usage",
    ]
    assert "".join(s.text for s in found) == source
    assert "# a comment, not a heading" in found[3].text


@pytest.mark.parametrize(
    ("suffix", "source", "headings"),
    [
        (".py", "import os\n\n@cache\ndef load(x):\n    def inner():\n        pass\n\nclass Store:\n    pass\n", [None, "load", "Store"]),
        (".py", "x = 1\n@dataclass(frozen=True)\n@total\nclass Point:\n    x: int\n@odd\n", [None, "Point"]),
        (
            ".js",
            "const a = 1;\nexport async function fetchAll() {}\nconst go = (x) => x;\nclass View {}\n",
            [None, "fetchAll", "go", "View"],
        ),
        (".ts", "export interface Options {\n  a: number;\n}\nexport default class App {}\n", ["Options", "App"]),
        (".go", "package main\n\nfunc (s *Server) Serve() error {\n}\ntype Point struct{}\n", [None, "Serve", "Point"]),
        (".rs", "use std::fmt;\npub fn parse() {}\nimpl fmt::Display for Point {\n}\n", [None, "parse", "fmt::Display for Point"]),
        (".c", "#include <stdio.h>\nstatic int\nmain(int argc, char **argv)\n{\n}\nstruct point {\n};\n", [None, "main", "point"]),
        (".java", "package a;\npublic final class Kettle {\n  void boil() {}\n}\n", [None, "Kettle"]),
        (".rb", "require 'x'\nmodule Tides\nend\ndef self.compute\nend\n", [None, "Tides", "compute"]),
        (".sh", "#!/bin/sh\nset -e\nbuild() {\n  make\n}\n", [None, "build"]),
        (".toml", "[project]\nname = 'cove'\n[[tool.x]]\n", ["project", "tool.x"]),
        (".yaml", "name: ci\njobs:\n  test: {}\n", ["name", "jobs"]),
        (".json", '{\n"a": 1\n}\n', [None]),
    ],
)
def test_code_headings_are_the_top_level_definitions(suffix: str, source: str, headings: list[str | None]) -> None:
    found = list(code_sections(iter(source.splitlines(keepends=True)), suffix))
    assert [s.heading for s in found] == headings
    assert "".join(s.text for s in found) == source
    assert all(not s.text.rstrip().endswith(("@cache", "@total")) for s in found)  # decorators go with their definition


def test_empty_files(tmp_path: Path) -> None:
    for name in ("empty.txt", "empty.md", "empty.html", "empty.py"):
        (tmp_path / name).write_bytes(b"")
        assert sections(tmp_path / name) == []
    (tmp_path / "empty.pdf").write_bytes(b"")
    assert problem(tmp_path / "empty.pdf") == "is damaged or not a PDF"
    (tmp_path / "empty.docx").write_bytes(b"")
    assert problem(tmp_path / "empty.docx") == "is damaged or not a Word (.docx) document"


def test_suffixes() -> None:
    assert {
        ".txt",
        ".md",
        ".html",
        ".htm",
        ".pdf",
        ".docx",
        ".py",
        ".js",
        ".ts",
        ".c",
        ".h",
        ".cpp",
        ".rs",
        ".go",
        ".java",
        ".rb",
        ".sh",
        ".toml",
        ".yaml",
        ".json",
        ".css",
    } <= SUFFIXES
    assert all(s == s.lower() and s.startswith(".") for s in SUFFIXES)
    assert is_supported(Path("REPORT.PDF")) and is_supported(Path("a/b/notes.Md"))
    assert not is_supported(Path("photo.jpg")) and not is_supported(Path("Makefile"))


def test_lines_keep_their_ends_across_pieces() -> None:
    found = list(lines(["a\r", "\nb\r", "c\n", "d" * 10, "e" * 10], longest=8))
    assert found == ["a\r\n", "b\r", "c\n", "d" * 8, "d" * 2 + "e" * 6, "e" * 4]


def test_html_navigation_and_heading_anchors_are_left_out(tmp_path: Path) -> None:
    page = tmp_path / "sphinx.html"
    page.write_text(
        '<html><body><div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="x">index</a></li></ul></div>'
        '<div class="body"><section><h1>File objects<a class="headerlink" href="#f">¶</a></h1>'
        "<p>Use <code>readline()</code> to read one line.</p></section></div>"
        '<div class="sphinxsidebar" role="navigation"><div><h3>This Page</h3><div><p>Show Source</p></div></div></div>'
        "<nav><p>Previous topic</p></nav><footer><p>Copyright the authors.</p></footer></body></html>"
    )
    sections = list(read_sections(page))
    text = "".join(s.text for s in sections)
    assert "Use readline() to read one line." in text and "Copyright the authors." in text
    for chrome in ("Navigation", "index", "This Page", "Show Source", "Previous topic", "¶"):
        assert chrome not in text, chrome
    assert {s.heading for s in sections if "readline" in s.text} == {"File objects"}
