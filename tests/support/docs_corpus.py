"""A corpus of real documents for the documents tests: files of every kind the readers read, each
holding known, distinctive sentences (which file, page and heading each is in), and the bad
cases of issue 33 point 2 (a scanned PDF, an encrypted PDF, corrupt files, a 2 GB sparse file, a
binary file named .txt, an unreadable file, a symlink loop), each with the sentence it must get.
Written in well under two seconds; the 2 GB file is sparse (os.truncate), so it takes no disk."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import docx
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas


class Fact(NamedTuple):
    """A sentence (or a distinctive keyword of it) the corpus holds: the file (relative to the
    corpus root, with "/"), the 1-based page (PDF only) and the heading path it is under."""

    text: str
    path: str
    page: int | None = None
    heading: str | None = None


@dataclass
class Corpus:
    """What write_corpus wrote. `files`: every path written (good and bad, the symlinks too);
    `facts`: sentences retrieval must find; `bad`: relative path -> a fragment of the sentence
    its problem gets; `unreadable`: the chmod 000 file, in `bad` only when not running as root
    (root reads it; see without_file_override to run a command that cannot)."""

    root: Path
    files: list[Path] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    bad: dict[str, str] = field(default_factory=dict)
    unreadable: str | None = None  # the chmod 000 file (relative); root reads it anyway

    def fact(self, keyword: str) -> Fact:
        """The fact whose text holds `keyword`."""
        return next(f for f in self.facts if keyword in f.text)

    @property
    def good(self) -> list[Path]:
        """The files that read without a problem (those not in `bad`, links and the unreadable file left out)."""
        skip = set(self.bad) | ({self.unreadable} if self.unreadable else set())
        return [p for p in self.files if p.relative_to(self.root).as_posix() not in skip and not p.is_symlink()]


LIGHTHOUSE = "The lighthouse keeper counted 417 gulls before the storm reached Harrow Point."
WARRANTY = "The warranty covers the copper kettle for seven years from the day of purchase."
TOMATOES = "Plant the Brandywine tomatoes after the last frost in May."
SOURDOUGH = "The sourdough starter doubles in nine hours at 24 degrees."
CAFE = "Le café de Mère Lucienne ouvre à sept heures."
VIOLIN = "The violin was tuned to 432 hertz in Gdańsk."
TIDE = "Compute the tide table for Port Ellery from the harmonic constants."
QUINCE = "Quince jelly sets only when the fruit is picked before the first yellow leaf."
COBALT = "Cobalt blue"
HIDDEN_SCRIPT = "SCRIPT_TEXT_NEVER_INDEXED"

HUGE_SIZE = 2 * 1024**3
# Root reads a chmod 000 file; without these two capabilities it cannot (it stays root, so the venv's
# Python under /root is still reachable, which it is not for nobody via setpriv --reuid).
_NO_FILE_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]


def without_file_override(command: list[str]) -> list[str]:
    """`command` so that it runs subject to file permissions: under root, prefixed by setpriv
    dropping the capabilities that override them; otherwise as it is."""
    return [*_NO_FILE_OVERRIDE, *command] if os.geteuid() == 0 else list(command)


def write_corpus(root: Path, *, bad: bool = True) -> Corpus:
    """Write the corpus under `root` (made if missing) and say what it holds."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(root=root)

    def put(relative: str, data: bytes | str, encoding: str = "utf-8") -> Path:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode(encoding) if isinstance(data, str) else data)
        corpus.files.append(path)
        return path

    put(
        "report.pdf",
        _pdf(
            [
                ["Annual report of the Harrow Point station.", "Page one holds the summary of the year."],
                ["The second page lists the supplies: oil, wicks, and bread."],
                ["Birds", LIGHTHOUSE],
                ["The fourth page is the keeper's signature and the date."],
            ]
        ),
    )
    corpus.facts.append(Fact(LIGHTHOUSE, "report.pdf", page=3))
    corpus.facts.append(Fact("oil, wicks, and bread", "report.pdf", page=2))

    put("manual.docx", _docx())
    corpus.facts.append(Fact(WARRANTY, "manual.docx", heading="Kettle manual > Warranty"))
    corpus.facts.append(Fact(COBALT, "manual.docx", heading="Kettle manual > Colours"))

    put(
        "garden.html",
        (
            "<!doctype html><html><head><meta charset='utf-8'><title>Garden notes</title>"
            f"<script>var secret = '{HIDDEN_SCRIPT}';</script><style>p {{ color: green }}</style></head><body>"
            "<h1>Garden</h1><p>Notes from the allotment.</p>"
            f"<h2>Tomatoes</h2><p>{TOMATOES.replace('Brandywine', '<b>Brandywine</b>')}</p>"
            "<h2>Beans</h2><ul><li>Runner beans climb.</li><li>Broad beans do not.</li></ul></body></html>"
        ),
    )
    corpus.facts.append(Fact(TOMATOES, "garden.html", heading="Garden > Tomatoes"))

    put(
        "notes/recipes.md",
        (
            "# Recipes\n\nThe family's recipes.\n\n## Bread\n\n" + SOURDOUGH + "\n\n"
            "## Preserves\n\n" + QUINCE + "\n\n```sh\n# not a heading\n```\n"
        ),
    )
    corpus.facts.append(Fact(SOURDOUGH, "notes/recipes.md", heading="Recipes > Bread"))
    corpus.facts.append(Fact(QUINCE, "notes/recipes.md", heading="Recipes > Preserves"))

    put("notes/cafe-latin1.txt", f"Notes de voyage.\n\n{CAFE}\nLes élèves arrivent tôt, déjà fatigués.\n", "latin-1")
    corpus.facts.append(Fact(CAFE, "notes/cafe-latin1.txt"))
    put("notes/violin-utf16.txt", f"Concert notes.\n\n{VIOLIN}\n", "utf-16")  # with a BOM
    corpus.facts.append(Fact(VIOLIN, "notes/violin-utf16.txt"))
    put("notes/bom-utf8.txt", "\ufeffThe ferry to Inishmore leaves at 08:15 from Rossaveal.\n")
    corpus.facts.append(Fact("The ferry to Inishmore leaves at 08:15 from Rossaveal.", "notes/bom-utf8.txt"))

    put(
        "code/tides.py",
        (
            '"""Tide tables."""\n\nimport math\n\n\n'
            f'def compute_tide_table(day: int) -> list[float]:\n    """{TIDE}"""\n'
            "    return [math.sin(day + h) for h in range(24)]\n\n\n"
            'class Harbour:\n    """The harbour master\'s ledger of berths."""\n'
        ),
    )
    corpus.facts.append(Fact(TIDE, "code/tides.py", heading="compute_tide_table"))
    corpus.facts.append(Fact("harbour master's ledger", "code/tides.py", heading="Harbour"))

    if bad:
        _write_bad(corpus, put)
    return corpus


def _write_bad(corpus: Corpus, put: Callable[..., Path]) -> None:
    root = corpus.root
    put("bad/scanned.pdf", _pdf([[]], shapes=True))
    corpus.bad["bad/scanned.pdf"] = "scanned PDF with no text layer"
    put("bad/locked.pdf", _encrypted(_pdf([["A secret the password keeps."]])))
    corpus.bad["bad/locked.pdf"] = "encrypted with a password"
    put("bad/corrupt.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8 + b"\n%%EOF\n")
    corpus.bad["bad/corrupt.pdf"] = "damaged or not a PDF"
    put("bad/corrupt.docx", b"PK\x03\x04 this is not really a zip archive" + bytes(200))
    corpus.bad["bad/corrupt.docx"] = "damaged or not a Word"
    huge = put("bad/huge.txt", b"")
    os.truncate(huge, HUGE_SIZE)  # sparse: no blocks written
    corpus.bad["bad/huge.txt"] = "is 2.0 GB; files over 512 MB are left out"
    put("bad/binary.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 16)
    corpus.bad["bad/binary.txt"] = "looks like a binary file, not text"
    secret = put("bad/unreadable.txt", "This note is private to its owner.\n")
    secret.chmod(0)
    corpus.unreadable = "bad/unreadable.txt"
    if os.geteuid() != 0:
        corpus.bad["bad/unreadable.txt"] = "cannot be read (permission denied)"
    for name, target in (("bad/loop-a.txt", "loop-b.txt"), ("bad/loop-b.txt", "loop-a.txt")):
        link = root / name
        link.symlink_to(target)
        corpus.files.append(link)
        corpus.bad[name] = "symbolic link that loops"


def _pdf(pages: list[list[str]], *, shapes: bool = False) -> bytes:
    """A PDF with a page per entry, each line of text drawn on it (a text layer); `shapes`: a
    page of drawn shapes only, as a scan without OCR looks to a text extractor."""
    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4, invariant=True)
    for lines in pages:
        if shapes:
            pdf.setFillColorRGB(0.2, 0.2, 0.2)
            for row in range(40):
                pdf.rect(60, 780 - row * 18, 300 + (row * 37) % 160, 9, stroke=0, fill=1)
            pdf.circle(300, 100, 40, fill=1)
        y = 780
        for line in lines:
            pdf.drawString(60, y, line)
            y -= 20
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def _encrypted(data: bytes) -> bytes:
    """`data` (a PDF) encrypted with a user password (AES-256)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password="kettle-417", owner_password="owner-417", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _docx() -> bytes:
    """A Word document with a title, Heading 1 sections (one holds WARRANTY) and a table."""
    document = docx.Document()
    document.add_heading("Kettle manual", level=1)
    document.add_paragraph("Thank you for choosing the copper kettle.")
    document.add_heading("Filling", level=2)
    document.add_paragraph("Fill the kettle to the line marked MAX, never above it.")
    document.add_heading("Warranty", level=2)
    document.add_paragraph(WARRANTY)
    document.add_heading("Colours", level=2)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Colour"
    table.cell(0, 1).text = "Code"
    table.cell(1, 0).text = COBALT
    table.cell(1, 1).text = "CB-7"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
