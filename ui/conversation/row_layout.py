"""Geometry of one message row, and the caches that keep rendering off the scrolling path.

A row is laid out only when it is painted (or about to be): the rendered SafeTextDocument
lives in an LRU keyed by content, the row geometry in a dict keyed by message id and checked
against the MessageItem's identity (a frozen record is replaced on every change). Rows that
were never painted get a cheap height estimate, so the list view can place thousands of them
without rendering any. A streaming row's text is its StreamingReply (ui/conversation/streaming/reply.py).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics

from app.draft_metrics import draft_figures
from app.placement.line import where_line
from ui.conversation.image_rows import ImagesLayout, layout_images
from ui.conversation.item_model import MessageItem, speaker
from ui.conversation.reasoning_rows import ReasoningLayout, estimate_text_height, layout_reasoning
from ui.conversation.source_rows import SourcesLayout, layout_sources, sources_bottom
from ui.conversation.streaming.reply import StreamingReply
from ui.conversation.text.markdown_render import Rendered, document_stylesheet, render_markdown
from ui.conversation.text.safe_document import SafeTextDocument

MARGIN_X = 12  # row edge to card
MARGIN_Y = 5
PAD_X = 14  # card edge to text
PAD_Y = 10
GAP = 6
ACTION_SPACING = 16
ARROW_WIDTH = 16
DOC_CACHE_SIZE = 256
# A streaming reply's row grows this many lines at a time, not one. Every change of a row's
# height makes the list lay out again and repaint all of the viewport; growing by
# three lines at once does that a third as often, and leaves at most two blank lines under the
# text while it streams. The row takes its exact height when the reply ends.
STREAM_GROW_LINES = 3

STATUS_NOTICES = {
    "cancelled": ("Stopped before the end.", "warn"),
    "interrupted": ("Interrupted: Cove closed before this reply finished.", "warn"),
    "length": ("Cut off: the reply reached its length limit.", "warn"),
}
STATUS_LABELS = {
    "streaming": "writing…",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
    "length": "cut off",
    "error": "failed",
}
STOP_REASONS = {"stop": "end of reply", "length": "length limit", "cancelled": "cancelled"}
NOT_SEEN_NOTE = "Not seen by the model: context full"
# An Auto reply's actions: "Regenerate with MODEL" (its kind is REGENERATE_WITH + ":" + the model's
# name, so each has its own place) and "Always MODEL for KIND".
REGENERATE_WITH = "regenerate_with"
ALWAYS = "always"
NAME_CHARS = 28  # a longer model name is shortened in the middle in an action's label


def metrics_line(metrics: dict) -> str:
    """Where it ran (a server's host) · TTFT · prompt tokens and speed · reply tokens (the answer's,
    then the thinking's, when the model thought) and speed · drafted and accepted tokens (when it
    drafted) · stop reason, from what is known."""

    def num(key: str) -> float | None:
        value = metrics.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    parts: list[str] = []
    where = where_line(metrics)
    if where is not None:
        parts.append(where)
    ttft = num("ttft_ms")
    if ttft is not None:
        parts.append(f"TTFT {ttft:,.0f} ms")
    prompt_tokens, prompt_tps = num("prompt_tokens"), num("prompt_tps")
    if prompt_tokens is not None or prompt_tps is not None:
        text = "prompt"
        if prompt_tokens is not None:
            text += f" {prompt_tokens:,.0f} tok"
        if prompt_tps is not None:
            text += f" at {prompt_tps:,.1f} tok/s"
        parts.append(text)
    gen_tokens, gen_tps = num("gen_tokens"), num("gen_tps")
    thought = num("reasoning_tokens")  # of gen_tokens, those the model thought in (app/turn/reasoning.py)
    if gen_tokens is not None or gen_tps is not None:
        text = "reply"
        if gen_tokens is not None and thought is not None and 0 < thought <= gen_tokens:
            text += f" {gen_tokens - thought:,.0f} tok + thinking {thought:,.0f} tok"  # the answer's own count first
        elif gen_tokens is not None:
            text += f" {gen_tokens:,.0f} tok"
        if gen_tps is not None:
            text += f" at {gen_tps:,.1f} tok/s"
        parts.append(text)
    draft = draft_figures(metrics)
    if draft is not None:
        parts.append(draft.short())
    stop = metrics.get("stop_reason")
    if isinstance(stop, str) and stop:
        parts.append(f"stop: {STOP_REASONS.get(stop, stop)}")
    return " · ".join(parts)


def status_notice(item: MessageItem) -> tuple[str, str] | None:
    """(sentence, 'warn' | 'error') for a reply that did not complete, or whose tool calls did not
    run (its `tool_note`), else None."""
    note = (item.metrics or {}).get("tool_note")
    if isinstance(note, str) and note and item.role == "assistant":
        return (note[:1].upper() + note[1:] + ".", "warn")
    if item.status == "error":
        return (f"Failed: {item.error}" if item.error else "Failed: the engine reported an error.", "error")
    if item.status == "interrupted" and item.error:  # a server's stream that broke off: its reason
        return (f"Interrupted: {item.error}", "warn")
    return STATUS_NOTICES.get(item.status)


# Every field of a message but its text, from the dataclass itself so a new field counts too.
_CHROME_FIELDS = tuple(f.name for f in fields(MessageItem) if f.name != "content")


def same_chrome(a: MessageItem, b: MessageItem) -> bool:
    """Whether two versions of a message lay out the same apart from their text."""
    return all(getattr(a, name) == getattr(b, name) for name in _CHROME_FIELDS)


def actions_for(item: MessageItem) -> list[tuple[str, str]]:
    """(kind, label) of the action links under a message, in order."""
    actions: list[tuple[str, str]] = []
    if item.version_count > 1:
        actions += [("version_prev", "‹"), ("version_label", f"{item.version_index}/{item.version_count}"), ("version_next", "›")]
    if item.status == "streaming":
        return actions
    if item.tool is not None:  # a tool call's row (ui/conversation/tool_rows.py)
        return [("details", "Hide details" if item.tool.expanded else "Show details"), ("copy", "Copy")]
    actions.append(("copy", "Copy"))
    if item.role == "assistant" and item.status == "complete":
        actions.append(("regenerate", "Regenerate"))
        actions += [(f"{REGENERATE_WITH}:{name}", f"Regenerate with {short_name(name)}") for name in item.regenerate_with]
        if item.always is not None:
            actions.append((ALWAYS, f"Always {short_name(item.always[0])} for {item.always[1]}"))
    elif item.role == "assistant":
        actions.append(("retry", "Retry"))
    elif item.role == "user":
        actions.append(("edit", "Edit"))
    return actions


def short_name(name: str) -> str:
    """A model's name for an action's label: at most NAME_CHARS characters, shortened in the middle."""
    if len(name) <= NAME_CHARS:
        return name
    keep = NAME_CHARS - 1
    return name[: keep - keep // 2] + "…" + name[len(name) - keep // 2 :]


@dataclass
class RowLayout:
    """Where each part of a row goes, relative to the row's top-left corner (UI thread only)."""

    item: MessageItem
    width: int
    height: int
    card: QRect
    header: QRect
    header_text: str
    status_label: str
    doc: SafeTextDocument | None
    rendered: Rendered | None
    doc_left: int
    doc_top: int
    notice: tuple[str, str] | None = None
    notice_rect: QRect = field(default_factory=QRect)
    not_seen_rect: QRect = field(default_factory=QRect)
    metrics_text: str = ""
    metrics_rect: QRect = field(default_factory=QRect)
    actions: list[tuple[str, str, QRect]] = field(default_factory=list)
    doc_height: int = 0  # the height the text was given
    doc_room: int = 0  # the height a streaming row keeps for its text (whole steps of lines)
    sources: SourcesLayout | None = None  # the reply's sources (ui/conversation/source_rows.py)
    reasoning: ReasoningLayout | None = None  # the reply's reasoning line (ui/conversation/reasoning_rows.py)
    images: ImagesLayout | None = None  # the message's images, above its text (ui/conversation/image_rows.py)


class DocumentStore:
    """Rendered documents: an LRU for finished messages, one growing document per streaming one."""

    def __init__(self, *, on_refused: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._docs: OrderedDict[tuple, tuple[SafeTextDocument, Rendered]] = OrderedDict()
        self._streams: dict[str, StreamingReply] = {}
        self._on_refused = on_refused
        self._clock = clock
        self.render_count = 0  # public counter: markdown renders done, finished messages' and streaming tails'
        self.font = QFont()
        self.dark = False

    def clear(self) -> None:
        self._docs.clear()
        self._streams.clear()

    def forget_streams(self, keep_ids: set[str]) -> None:
        """Drop streaming documents of messages that are no longer shown."""
        self._streams = {k: v for k, v in self._streams.items() if k in keep_ids}

    def stream(self, message_id: str) -> StreamingReply | None:
        """The reply of a streaming message (None when it has none yet)."""
        return self._streams.get(message_id)

    def document(self, item: MessageItem, width: int) -> tuple[SafeTextDocument, Rendered]:
        if item.status == "streaming":
            return self._stream_document(item, width)
        self._streams.pop(item.id, None)
        key = (item.role, len(item.content), hash(item.content), self.dark)
        hit = self._docs.get(key)
        if hit is None:
            hit = self._render(item.content)
            self._docs[key] = hit
            if len(self._docs) > DOC_CACHE_SIZE:
                self._docs.popitem(last=False)
        else:
            self._docs.move_to_end(key)
        doc = hit[0]
        if doc.textWidth() != width:
            doc.setTextWidth(width)
        return hit

    def _stream_document(self, item: MessageItem, width: int) -> tuple[SafeTextDocument, Rendered]:
        reply = self._streams.get(item.id)
        if reply is None or not reply.settle(item.content):
            reply = StreamingReply(self._new_document(), dark=self.dark, clock=self._clock, on_render=self._count_render)
            self._streams[item.id] = reply
            reply.settle(item.content)
        reply.set_width(width)
        return reply.document, reply.rendered

    def _count_render(self) -> None:
        self.render_count += 1

    def _new_document(self) -> SafeTextDocument:
        doc = SafeTextDocument(on_refused=self._on_refused)
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self.font)
        doc.setDefaultStyleSheet(document_stylesheet(self.dark))
        return doc

    def _render(self, content: str) -> tuple[SafeTextDocument, Rendered]:
        doc = self._new_document()
        return doc, self._fill(doc, content)

    def _fill(self, doc: SafeTextDocument, content: str) -> Rendered:
        self.render_count += 1
        rendered = render_markdown(content, palette_dark=self.dark)
        doc.setHtml(rendered.html)
        return rendered


class Layouter:
    """Row geometry from fonts and width; exact (with a document) or estimated (without)."""

    def __init__(self, font: QFont) -> None:
        self.set_font(font)

    def set_font(self, font: QFont) -> None:
        self.font = QFont(font)
        self.bold = QFont(font)
        self.bold.setBold(True)
        self.small = QFont(font)
        if font.pointSizeF() > 0:
            self.small.setPointSizeF(font.pointSizeF() * 0.88)
        else:
            self.small.setPixelSize(max(9, round(font.pixelSize() * 0.88)))
        self.fm = QFontMetrics(self.font)
        self.fm_bold = QFontMetrics(self.bold)
        self.fm_small = QFontMetrics(self.small)
        self.avg_char = max(1.0, self.fm.averageCharWidth() * 1.05)
        self.line_spacing = self.fm.lineSpacing()
        self._chrome: dict[tuple, int] = {}

    def estimate_height(self, item: MessageItem, width: int) -> int:
        """A row's height without rendering it: the exact chrome plus estimated text lines."""
        notice = status_notice(item)
        shape = (
            width,
            item.role,
            item.status,
            bool(item.content),
            item.seen_by_model,
            bool(item.metrics),
            item.version_count > 1,
            notice[0] if notice else None,
            (item.sources.title, len(item.sources.lines)) if item.sources is not None else None,
            item.reasoning.expanded if item.reasoning is not None else None,
            tuple((i.width, i.height) for i in item.images),
            (item.regenerate_with, item.always),  # an Auto reply's actions may take a second line
        )
        chrome = self._chrome.get(shape)
        if chrome is None:
            chrome = self.layout(item, width, None, None, 0).height
            if len(self._chrome) > 512:
                self._chrome.clear()
            self._chrome[shape] = chrome
        if item.reasoning is not None and item.reasoning.expanded:  # the chrome has one line for its text
            chrome += max(
                0, estimate_text_height(item.reasoning.text, self.text_width(width), self.avg_char, self.line_spacing) - self.fm.height()
            )
        if not item.content:
            return chrome
        return chrome + max(0, self.estimate_doc_height(item, width) - self.fm.height())

    def text_width(self, width: int) -> int:
        return max(40, width - 2 * (MARGIN_X + PAD_X))

    def estimate_doc_height(self, item: MessageItem, width: int) -> int:
        # O(1) in Python (str.count runs in C): thousands of rows are estimated at once.
        content = item.content
        per_line = max(8, int(self.text_width(width) / self.avg_char))
        lines = content.count("\n") + 1 + len(content) // per_line
        # Code fences get a header row and padding in the rendered document.
        fences = content.count("```") // 2
        return lines * self.line_spacing + fences * (self.line_spacing + 24)

    def stream_room(self, doc_height: int) -> int:
        """The height a streaming row gives text `doc_height` tall: whole STREAM_GROW_LINES steps."""
        step = STREAM_GROW_LINES * self.line_spacing
        return max(-(-doc_height // step) * step, self.fm.height())

    def layout(
        self,
        item: MessageItem,
        width: int,
        doc: SafeTextDocument | None,
        rendered: Rendered | None,
        doc_height: int,
        reasoning_doc: SafeTextDocument | None = None,
    ) -> RowLayout:
        """`reasoning_doc`: the open reasoning's text (ReasoningDocs); without it, it takes one line."""
        inner_left = MARGIN_X + PAD_X
        inner_width = self.text_width(width)
        y = MARGIN_Y + PAD_Y
        header = QRect(inner_left, y, inner_width, self.fm_bold.height())
        y = header.bottom() + 1 + GAP
        reasoning = None
        if item.reasoning is not None:  # between the speaker and the answer
            text_height = round(reasoning_doc.size().height()) if reasoning_doc is not None else 0
            reasoning = layout_reasoning(item.reasoning, reasoning_doc, self.fm, self.fm_small, inner_left, inner_width, y, text_height)
            y = reasoning.bottom + 1 + GAP + (GAP if item.reasoning.expanded else 0)
        images = None
        if item.images:  # between the speaker and the text, sized from the history alone
            images = layout_images(item.images, inner_left, inner_width, y)
            y = images.bottom + 1 + GAP
        # While it thinks, its line says so ("Thinking… 14 s"): no "writing…" beside the speaker.
        thinking = reasoning is not None and item.reasoning.live and item.status == "streaming"
        status_label = "" if thinking else STATUS_LABELS.get(item.status, "")
        lay = RowLayout(
            item=item,
            width=width,
            height=0,
            card=QRect(),
            header=header,
            header_text=speaker(item),
            status_label=status_label,
            doc=doc,
            rendered=rendered,
            doc_left=inner_left,
            doc_top=y,
            doc_height=doc_height,
            reasoning=reasoning,
            images=images,
        )
        if item.status == "streaming":
            lay.doc_room = self.stream_room(doc_height)
            y += lay.doc_room
        elif item.content:
            y += max(doc_height, self.fm.height())
        else:
            y -= GAP
        lay.notice = status_notice(item)
        if lay.notice is not None:
            flags = Qt.TextFlag.TextWordWrap
            box = self.fm.boundingRect(QRect(0, 0, inner_width, 10_000), int(flags), lay.notice[0])
            lay.notice_rect = QRect(inner_left, y + GAP, inner_width, box.height())
            y = lay.notice_rect.bottom() + 1
        if not item.seen_by_model:
            lay.not_seen_rect = QRect(inner_left, y + GAP, inner_width, self.fm_small.height())
            y = lay.not_seen_rect.bottom() + 1
        if item.role == "assistant" and item.status != "streaming":
            lay.metrics_text = " · ".join(part for part in (item.auto, metrics_line(item.metrics or {})) if part)
            if lay.metrics_text:
                lay.metrics_rect = QRect(inner_left, y + GAP, inner_width, self.fm_small.height())
                y = lay.metrics_rect.bottom() + 1
        if item.sources is not None and item.status != "streaming":
            lay.sources = layout_sources(item.sources, self.fm_small, inner_left, inner_width, y, GAP)
            y = sources_bottom(lay.sources) + 1
        actions = actions_for(item)
        if actions:
            y += GAP
            x = inner_left
            for kind, label in actions:
                w = self.fm_small.horizontalAdvance(label)
                if kind in ("version_prev", "version_next"):
                    w = max(w, ARROW_WIDTH)  # a glyph this narrow needs a wider target
                if x > inner_left and x + w > inner_left + inner_width:  # the next line of actions
                    x, y = inner_left, y + self.fm_small.lineSpacing() + GAP // 2
                lay.actions.append((kind, label, QRect(x, y, w, self.fm_small.height())))
                x += w + (2 if kind.startswith("version") else ACTION_SPACING)
                if kind == "version_next":
                    x += ACTION_SPACING - 2
            y += self.fm_small.height()
        y += PAD_Y
        lay.card = QRect(MARGIN_X, MARGIN_Y, width - 2 * MARGIN_X, y - MARGIN_Y)
        lay.height = y + MARGIN_Y
        return lay
