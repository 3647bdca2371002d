"""The values that cross between the parts of app/docs (readers, chunker, index, search, the turn's
sources) and out to the window and the command line. Frozen: they cross threads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Section:
    """A run of text a reader found, in file order: a PDF page, a Markdown or DOCX section, an HTML
    block, a stretch of source code. `start` is the character offset of `text` in the file's text
    as the reader gives it (the sections' texts end to end); `page` is 1-based (PDF only);
    `heading` is the heading path above the text ("Install > From source"), or None."""

    text: str
    start: int
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True)
class Chunk:
    """One passage as indexed: `start`/`end` are character offsets in the file's text (as for
    Section), `hash` the SHA-256 (hex) of `text`."""

    text: str
    start: int
    end: int
    hash: str
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True)
class Passage:
    """A chunk a search returned: where it comes from and how it ranked. `rank_bm25` and
    `rank_vector` are 1-based ranks in each list (None: not in that list); `score` is the fused
    score the passages are ordered by (app/docs/search.fuse: 0 to 1)."""

    chunk_id: int
    collection: str
    path: str
    text: str
    start: int
    end: int
    hash: str
    score: float
    page: int | None = None
    heading: str | None = None
    rank_bm25: int | None = None
    rank_vector: int | None = None

    @property
    def where(self) -> str:
        """Where in its file, for a person: "page 3", "Install > From source", or ""."""
        if self.page is not None:
            return f"page {self.page}" + (f", {self.heading}" if self.heading else "")
        return self.heading or ""


@dataclass(frozen=True)
class FileProblem:
    """A file that could not be indexed, and why, in one sentence."""

    path: str
    sentence: str


@dataclass(frozen=True)
class Progress:
    """Where an indexing run is: files done of total, the file being read (and its page of its
    pages, for a PDF), bytes done of total (for the time left), the problems met so far, the
    files the walk left out unread (by pattern or type), with why, and then, every file searchable
    by keywords, the passages embedded of those to embed."""

    collection: str
    files_done: int
    files_total: int
    current: str | None = None
    bytes_done: int = 0
    bytes_total: int = 0
    problems: tuple[FileProblem, ...] = field(default_factory=tuple)
    finished: bool = False
    paused: bool = False
    page: int = 0  # the page of `current` being read (PDF), 1-based; 0: not a paged file
    pages: int = 0  # `current`'s pages (PDF); 0: not a paged file
    left_out: tuple[FileProblem, ...] = field(default_factory=tuple)
    vectors_done: int = 0  # passages embedded so far, once every file is searchable by keywords
    vectors_total: int = 0  # passages this run embeds (0: none, or no embedder)
