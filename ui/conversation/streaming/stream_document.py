"""The document of a reply that is still streaming: finished blocks rendered once, the tail re-rendered.

Re-rendering a whole reply as markdown every frame would cost O(reply) per frame. Here the
text is cut at the last top-level block boundary (a line after a blank line, outside any code
fence): everything before it is rendered once and appended to the document, only the trailing
block is replaced. Between markdown renders new characters are shown
as plain text after the document (ui/conversation/streaming/plain_tail.py). The tail is rendered again only when its
new text can change what markdown shows (renders_as_plain): plain words that continue the
rendered line never need it, so a prose paragraph streams with one render at its start and
one at its end. A paragraph with a character the font lacks (Chinese, Japanese: drawn with a
fallback font, whose lines are taller) takes its new text into the document instead, so Qt's
own layout places its lines (_fallback_block), until a Latin word starts a script run of its
own after CJK letters (past_fallback_run). A newline goes into such a paragraph only once the
text after it says what markdown makes of it: a space (a soft break), or a render now (a
paragraph's end, a list item; settle_newlines). The reply gets one canonical whole render when
it finishes (DocumentStore).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from PySide6.QtGui import QTextCharFormat, QTextCursor

from ui.conversation.streaming.plain_tail import PlainTail, TailAnchor, settle_newlines
from ui.conversation.streaming.word_runs import in_primary_font, past_fallback_run
from ui.conversation.text.markdown_render import MAX_MARKDOWN_CHARS, Rendered, render_markdown
from ui.conversation.text.safe_document import SafeTextDocument

# Markdown renders of the tail at most this often; new text shows at once as plain text in
# between. Each render re-parses, re-inserts and lays out the whole trailing block, and the
# window's CPU comes out of the engine's cores on small machines; formatting still shows
# within a quarter of a second.
MIN_INTERVAL_S = 0.25
# A tail (one long paragraph or an open code block) longer than this is not re-rendered while it
# streams: each render costs O(tail), and a long one is a visible stall.
# It stays plain text until it is finished or the reply ends (then one whole render).
MAX_LIVE_TAIL_CHARS = 1500
# Pending plain text longer than this goes into the document (once), so a PlainTail stays a
# few lines long even while a long paragraph is not re-rendered.
MAX_PENDING_CHARS = 400
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# Characters that can start or end inline markdown (code, emphasis, links, autolinks,
# entities, escapes, strikethrough, table cells); raw HTML is off (ui/conversation/text/markdown_render.py).
_MARKDOWN_CHARS = frozenset("\\`*_[]<>&~|")
_LIST_MARKER = re.compile(r" {0,3}(?:[-+]|\d{1,9}[.)])(?:[ \t]|$)")
_HEADING_OR_INDENTED_CODE = re.compile(r" {0,3}#|    |\t")
_FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.MULTILINE)
# A line of markdown syntax alone so far: what text after it makes of it (and of the line above
# it) a render shows, a list marker, heading, rule, fence, quote or table row.
_OPEN_LINE = re.compile(r"[ \t]*[-*+=_#>`~|\d][-*+=_#>`~|\d.) \t]*")


class BlockBoundary:
    """Finds, incrementally, where the last finished top-level markdown block ends."""

    def __init__(self) -> None:
        self.scanned = 0  # always at a line start
        self.boundary = 0
        self._fence: str | None = None
        self._previous_blank = False

    def feed(self, text: str) -> int:
        end = text.rfind("\n") + 1  # complete lines only
        pos = self.scanned
        while pos < end:
            newline = text.index("\n", pos)
            line = text[pos:newline]
            if self._fence is not None:
                stripped = line.strip()
                if stripped.startswith(self._fence) and set(stripped) == {self._fence[0]}:
                    self._fence = None
                blank = False
            else:
                if self._previous_blank and line and not line[0].isspace():
                    self.boundary = pos
                match = _FENCE.match(line)
                if match:
                    self._fence = match.group(1)
                blank = not line.strip()
            self._previous_blank = blank
            pos = newline + 1
        self.scanned = pos
        return self.boundary


def renders_as_plain(content: str, stable_len: int, rendered_len: int) -> bool:
    """Whether content[rendered_len:] only adds plain words to the end of the line that
    content[:rendered_len] rendered: then a markdown render would show the same thing as that
    text drawn after the document (a PlainTail), and need not run.

    Conservative: no newline and no markdown character in the current line, which must have
    started before rendered_len and be no heading, indented code, list marker still being
    written, or rule; no table, fence or quote in the trailing block (content[stable_len:]).
    """
    new_start = content.rfind("\n") + 1  # of the current line
    if rendered_len <= new_start or rendered_len >= len(content):
        return False  # the line starts in the new text, or there is no new text
    line = content[new_start:]
    if not _MARKDOWN_CHARS.isdisjoint(line) or _HEADING_OR_INDENTED_CODE.match(line):
        return False
    marker = _LIST_MARKER.match(line)
    if marker is not None and marker.end() > rendered_len - new_start:
        return False  # "1" rendered, ". The" new: the line becomes a list item
    if not line.strip(" -=+"):
        return False  # "---" or "===": a rule, or the line above becomes a heading
    return all(content.find(mark, stable_len) < 0 for mark in ("|", "```", "~~~", ">"))


class StreamDocument:
    """One streaming reply's SafeTextDocument, kept up to date cheaply."""

    def __init__(
        self, doc: SafeTextDocument, *, dark: bool, clock: Callable[[], float] = time.monotonic, on_render: Callable[[], None] | None = None
    ) -> None:
        self.doc = doc
        self.text = ""  # the content the document shows
        self._dark = dark
        self._clock = clock
        self._on_render = on_render
        self._boundary = BlockBoundary()
        self._stable_len = 0  # text[:_stable_len] is rendered for good, before _tail_pos
        self._tail_pos = 0
        self._rendered_len = 0  # text[:_rendered_len] went through markdown
        self._links: list[str] = []
        self._code: list[str] = []
        self._images: list[str] = []
        self._rendered_tail = Rendered("")  # the markdown render of text[_stable_len:]
        self._rendered = Rendered("")  # of the whole document: what came before, then the tail
        self._rendered_at = float("-inf")
        self.interval = MIN_INTERVAL_S
        self._changed_from: int | None = None  # first document position changed since take_changed_area()
        self.pending = ""  # shown after the document's last line, not in the document
        self._pending_box: tuple[float, float, float] | None = None  # see take_changed_area()
        self._plain: PlainTail | None = None
        self._anchor: TailAnchor | None = None  # None after every document edit
        self._anchor_width = -1.0
        self._doc_size: tuple[float, float] | None = None  # the document's, until it changes
        self._plain_memo: tuple[tuple[int, int, int], bool] = ((-1, -1, -1), False)
        # The document's last block has a character the font lacks. Qt draws it with a fallback
        # font and makes every line of its script run as tall as that font's line (a CJK one's
        # are taller), lines above it included, and the run may reach back into the document:
        # a tail laid out on its own cannot know, so new text goes into the document until a
        # render starts a new block, or until a piece that starts with a space follows a Latin
        # letter after the block's last character the font lacks, a CJK letter: Qt makes that
        # Latin text a run of its own, whose lines (those below the CJK text's) are the font's.
        self._fallback_block = False
        self._past_fallback_run = True  # past_fallback_run() of the document's last block
        # The end of `text` in neither the document nor `pending` (only while _fallback_block):
        # blank text from a newline on, whose meaning the next text decides (settle_newlines).
        self._held = ""
        self._render_now = False  # _grow_pending() met a newline only a markdown render shows

    def _renders_as_plain(self, content: str) -> bool:
        """renders_as_plain() for this document's state, once per state (asked twice a frame)."""
        key = (len(content), self._stable_len, self._rendered_len)
        if self._plain_memo[0] != key:
            self._plain_memo = (key, renders_as_plain(content, self._stable_len, self._rendered_len))
        return self._plain_memo[1]

    def set_text_width(self, width: float) -> None:
        if self.doc.textWidth() != width:
            self.doc.setTextWidth(width)
            self._anchor, self._plain, self._doc_size = None, None, None

    def tail(self) -> PlainTail | None:
        """The pending text laid out after the document (None when nothing is pending)."""
        if not self.pending:
            return None
        if self._plain is None:
            in_code = len(_FENCE_LINE.findall(self.text, self._stable_len)) % 2 == 1
            self._plain = PlainTail(self._current_anchor(), self.pending, in_code=in_code)
        return self._plain

    def _current_anchor(self) -> TailAnchor:
        width = self.doc.textWidth()
        if self._anchor is None or self._anchor_width != width:
            self._anchor, self._anchor_width, self._plain = TailAnchor.of(self.doc), width, None
        return self._anchor

    def shown_text(self) -> str:
        """What the person sees, as plain text: the document, then the pending text (not the
        held blank text after them)."""
        return self.doc.toPlainText() + self.pending

    def doc_size(self) -> tuple[float, float]:
        """The document's (width, height), kept until it changes (asked every frame)."""
        if self._doc_size is None:
            size = self.doc.size()
            self._doc_size = (size.width(), size.height())
        return self._doc_size

    def height(self) -> float:
        """Height of the document and the pending text after it."""
        tail = self.tail()
        height = self.doc_size()[1]  # asked every frame; the document changes a few times a second
        return height if tail is None else max(height, tail.bottom)

    @property
    def doc_edited(self) -> bool:
        """The document itself changed (a markdown render or a fold) since take_changed_area()."""
        return self._changed_from is not None

    def take_changed_area(self) -> tuple[float, float, float] | None:
        """What changed since the last call, in document coordinates: (x, top, bottom) of the
        first changed line, from x to the right edge; every line below it changed too. None:
        nothing changed. A document edit changes whole lines (x is 0)."""
        area: tuple[float, float, float] | None = None
        if self._changed_from is not None:
            top = self._top_of_position(self._changed_from)
            area = (0.0, top, top)
        if self._pending_box is not None:
            box = self._pending_box
            if area is None:
                area = box
            else:
                area = (0.0, min(area[1], box[1]), min(area[2], box[2]))
        self._changed_from = self._pending_box = None
        return area

    def _top_of_position(self, position: int) -> float:
        # The line above the changed one too: greedy wrapping can pull its last word down.
        at = max(0, position - 1)
        block = self.doc.findBlock(at)
        if not block.isValid():
            return 0.0
        top = self.doc.documentLayout().blockBoundingRect(block).top()
        text_layout = block.layout()
        if text_layout is not None and text_layout.lineCount():
            line = text_layout.lineForTextPosition(at - block.position())
            if line.isValid():
                top += text_layout.lineAt(max(0, line.lineNumber() - 1)).y()
        return top

    def _keep_change(self, box: tuple[float, float, float]) -> None:
        """Have take_changed_area() report `box` (what _grow_pending() returned) too."""
        if self._pending_box is None or (box[1], box[0]) < (self._pending_box[1], self._pending_box[0]):
            self._pending_box = box

    def _grow_pending(self, piece: str) -> tuple[float, float, float] | None:
        """Add `piece` to the pending text and its tail (laid out lazily by tail()). Returns
        (x, top, bottom) of the first place the shown text changed: where the tail's last word
        starts (greedy wrapping may move it down), where it ends when `piece` starts with a
        space, or where the document's last line ends when nothing was pending. None: it went
        into the document with the pending text (see _fallback_block), or a render is due now
        (_render_now)."""
        new = piece
        font = self.doc.defaultFont()
        lacking = not piece.isascii() and not in_primary_font(font, piece)
        if not self.pending and not self._held and len(self.text) == self._rendered_len and self.text[-1:].isspace():
            # Markdown dropped the whitespace that ended the rendered text.
            end = len(self.text)
            while end and self.text[end - 1] in " \t\n":
                end -= 1
            gap = self.text[end:]
            if "\n" in gap and (self._fallback_block or lacking):
                self._held = gap  # what the newline is, the text after it decides
            elif not piece[:1].isspace():
                piece = " " + piece  # keep words apart
        if self._fallback_block and not lacking and self._past_fallback_run and piece[:1] == " " and not self._held:
            self._fallback_block = False  # a new word of the Latin run after the CJK text
        if self._fallback_block or lacking or self._held:
            # A fallback font's text: only the document's own layout puts its lines where Qt does.
            if not self._fallback_block:
                self._fallback_block = True
                self._mark_changed(self.doc.lastBlock().position())  # its lines above may grow too
            text, content = self.pending + self._held + piece, self.text + new
            settled = settle_newlines(text, self.doc.lastBlock().text()[-1:]) if "\n" in text else (text, "")
            joined = len(content) - len(text)
            if settled is not None and _OPEN_LINE.fullmatch(content, content.rfind("\n", 0, joined) + 1, joined):
                settled = None  # text after markdown syntax alone: "-" then " 長い", a list item
            if settled is not None and "\n" in text[: len(settled[0])]:  # a newline goes in as a space
                first = len(content) - len(text) + text.index("\n")
                line = content[content.rfind("\n", 0, first) + 1 : first]
                if _HEADING_OR_INDENTED_CODE.match(line) or any(
                    content.find(mark, self._stable_len) >= 0 for mark in ("|", "```", "~~~", ">")
                ):
                    settled = None  # it ends a heading, or a fence, table or quote is open: not a paragraph
            if settled is None and (
                len(content) - self._stable_len <= MAX_LIVE_TAIL_CHARS or self._boundary.feed(content) > self._stable_len
            ):
                self._render_now = True  # the caller renders `content`
                return None
            self.pending, self._held = settled if settled is not None else (text, "")
            if self.pending:
                self._fold_pending()
            self._past_fallback_run = past_fallback_run(font, self.doc.lastBlock().text())
            return None
        plain = self.tail()
        newline = "\n" in piece or "\n" in self.pending
        if plain is None:
            anchor = self._current_anchor()
            box = (anchor.x, anchor.top, anchor.bottom)
        else:
            # Not near a newline: new text can turn a soft line break into a hard one ("\n1."
            # then " x": a list item), which moves the last word down too.
            box = plain.last_word_box(closed=piece[:1] == " " and not newline)
        self.pending += piece
        # extended() lays out only the tail's end; how a newline shows depends on what follows it.
        self._plain = plain.extended(piece) if plain is not None and not newline else None
        return box

    def _mark_changed(self, position: int) -> None:
        self._changed_from = position if self._changed_from is None else min(self._changed_from, position)

    @property
    def rendered(self) -> Rendered:
        """Links, code blocks and images of the whole document (a new object after each render)."""
        return self._rendered

    def due_in(self) -> float | None:
        """Seconds until the plain tail is due for a markdown render; None when there is none."""
        if self._rendered_len == len(self.text):
            return None
        wait = self.render_wait(self.text)
        return None if wait is None else max(0.0, wait)

    def render_wait(self, content: str) -> float | None:
        """For `content` that extends what this document has: seconds until its tail is due for
        a markdown render (0 or less: now); None when it needs none (it renders as plain, or the
        tail is too long to re-render). The one place that decides it: update() renders when it
        says now, due_in() asks it for this text, and a reply's fast path for its new words."""
        if self._renders_as_plain(content):
            return None
        if len(content) - self._stable_len > MAX_LIVE_TAIL_CHARS and self._boundary.feed(content) <= self._stable_len:
            return None  # a tail too long to re-render stays plain until a block ends (no busy timer)
        return self._rendered_at + self.interval - self._clock()

    @property
    def pending_start(self) -> int:
        """Where the pending text starts in `text`."""
        return len(self.text) - len(self.pending) - len(self._held)

    def update(self, content: str) -> bool:
        """Show `content` (which extends what is shown). False when it does not extend it."""
        if not content.startswith(self.text):
            return False
        if self._rendered_len == len(content):
            return True
        now = self._clock()
        wait = self.render_wait(content)
        if wait is not None and wait <= 0:
            self._render_timed(content, now)
        elif len(content) > len(self.text):
            box = self._grow_pending(content[len(self.text) :])
            if self._render_now:
                self._render_timed(content, now)
            elif box is not None:
                self._keep_change(box)  # the earliest change since the last take
            if len(self.pending) > MAX_PENDING_CHARS:
                self._fold_pending()
        self.text = content
        return True

    def _render_timed(self, content: str, now: float) -> None:
        """_render(content), the next render held back by four times what this one cost."""
        self._render(content)
        cost = self._clock() - now
        self._rendered_at, self.interval = now, max(MIN_INTERVAL_S, 4 * cost)

    def _fold_pending(self) -> None:
        """Put the pending text into the document as plain text."""
        cursor = QTextCursor(self.doc)
        # One edit block: outside one, moving the cursor lays the last block out again just
        # to place the cursor, and the insert then lays it out once more (half the cost).
        cursor.beginEditBlock()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._mark_changed(cursor.position())
        # A plain character format: the text never joins a link that ends the document.
        cursor.insertText(self.pending, QTextCharFormat())
        cursor.endEditBlock()
        self.pending, self._plain, self._anchor, self._pending_box = "", None, None, None
        self._doc_size = None

    def _render(self, content: str) -> None:
        if self._on_render is not None:
            self._on_render()
        self.pending, self._plain, self._anchor, self._pending_box = "", None, None, None
        self._held, self._render_now, self._doc_size = "", False, None
        cursor = QTextCursor(self.doc)
        cursor.beginEditBlock()
        cursor.setPosition(self._tail_pos)
        self._mark_changed(self._tail_pos)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        boundary = self._boundary.feed(content) if len(content) <= MAX_MARKDOWN_CHARS else self._stable_len
        if boundary > self._stable_len:
            done = render_markdown(
                content[self._stable_len : boundary], palette_dark=self._dark, first_link=len(self._links), first_code=len(self._code)
            )
            self._insert_blocks(cursor, done.html)
            self._links += done.links
            self._code += done.code_blocks
            self._images += done.images
            self._stable_len = boundary
            self._tail_pos = cursor.position()
        self._rendered_tail = render_markdown(
            content[self._stable_len :], palette_dark=self._dark, first_link=len(self._links), first_code=len(self._code)
        )
        self._insert_blocks(cursor, self._rendered_tail.html)
        cursor.endEditBlock()
        tail = self._rendered_tail
        self._rendered = Rendered(
            "", tuple(self._code) + tail.code_blocks, tuple(self._links) + tail.links, tuple(self._images) + tail.images
        )
        self._rendered_len = len(content)
        last = self.doc.lastBlock().text()
        self._fallback_block = not in_primary_font(self.doc.defaultFont(), last)
        self._past_fallback_run = past_fallback_run(self.doc.defaultFont(), last)

    def _insert_blocks(self, cursor: QTextCursor, html: str) -> None:
        if not html:
            return
        # A new block, so the inserted HTML never merges into the last one. Not before a table
        # (Qt puts a frame on its own lines anyway) nor into an empty block (after a table).
        if cursor.block().length() > 1 and not html.startswith("<table"):
            cursor.insertBlock()
        cursor.insertHtml(html)
