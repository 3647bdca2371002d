"""A reply's reasoning (what a thinking model wrote before its answer): one line inside the reply's
row, between the speaker and the answer, collapsed by default. While the model thinks it reads
"Thinking… 14 s" (ui/conversation/reasoning_clock.py moves the seconds); once it answered,
"Thought for 14 s". A click on the line, or Enter or Space on the row, opens it to the reasoning
as plain text, with a "Copy thinking" link under it.

The reply's MessageItem carries it as `reasoning` (ReasoningShown, frozen; a change replaces it);
the answer stays the item's `content` alone, so Copy, Ctrl+C and the figures never count the
reasoning as the answer. The row layout places it, and the delegate paints and hit-tests it, with
the functions here. Reasoning is untrusted text: it is shown as plain text (never HTML or
Markdown), with control and bidirectional-override characters shown as visible escapes.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPolygonF, QTextCursor, QTextOption

from app.store.history import Message
from ui.conversation.text.document_paint import paint_document
from ui.conversation.text.safe_document import SafeTextDocument

REASONING, COPY_REASONING = "reasoning", "copy_reasoning"  # the delegate's Hit kinds
COPY_LABEL = "Copy thinking"
INDENT = 12  # the reasoning text's left edge, from the line's
CHEVRON = 14  # room for the ▸/▾ before the label
DOC_CACHE_SIZE = 64

# Shown as escapes (as the command line shows them, app/cli/terminal_text.py): C0 controls but
# newline and tab, DEL and C1, the bidirectional embeddings, overrides and isolates, and the
# bidirectional marks. Reasoning that reorders what is drawn after it is shown, not obeyed.
_CONTROLS: tuple[int, ...] = (
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x200E,
    0x200F,
    0x061C,
)
_VISIBLE = {code: ("\\r" if code == 0x0D else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") for code in _CONTROLS}


def visible_text(text: str) -> str:
    """`text` as the window shows it: each character listed above as a visible escape."""
    return text.translate(_VISIBLE)


def seconds_words(seconds: int) -> str:
    """14 -> "14 s", 75 -> "1 min 15 s"."""
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


@dataclass(frozen=True)
class ReasoningShown:
    """What a reply's reasoning line shows. `live`: the model is still thinking (from `started`,
    a time.perf_counter() time, `seconds` ago as last shown); `thought_ms`: how long it thought,
    once known (the reply's `reasoning_ms`, or measured in the window)."""

    text: str
    expanded: bool = False
    live: bool = False
    started: float | None = None
    seconds: int = 0
    thought_ms: float | None = None

    @property
    def label(self) -> str:
        if self.live:
            return f"Thinking… {seconds_words(self.seconds)}"
        if self.thought_ms is None:
            return "Thought before answering"
        if self.thought_ms < 1000:
            return "Thought for less than a second"
        return f"Thought for {seconds_words(round(self.thought_ms / 1000))}"


def _ms(metrics: Mapping[str, Any] | None) -> float | None:
    value = (metrics or {}).get("reasoning_ms")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def reasoning_of(message: Message) -> ReasoningShown | None:
    """The collapsed line of a stored reply that has reasoning, else None."""
    text = message.reasoning
    if not text or message.role != "assistant":
        return None
    return ReasoningShown(text, thought_ms=_ms(message.metrics))


def finished_reasoning(shown: ReasoningShown | None, message: Message) -> ReasoningShown | None:
    """The line of a reply that just ended: the stored reasoning (else what streamed), how long
    the model thought by the reply's figures (else as measured), open if the person opened it."""
    text = message.reasoning or (shown.text if shown is not None else "")
    if not text:
        return None
    thought = _ms(message.metrics)
    if thought is None and shown is not None:
        thought = shown.thought_ms if shown.thought_ms is not None else shown.seconds * 1000.0 if shown.live else None
    return ReasoningShown(text, expanded=shown.expanded if shown is not None else False, thought_ms=thought)


# --- changing a row of the view's ConversationModel (duck-typed: this module is imported by it) ---


def append_reasoning(model: Any, message_id: str, text: str, t: float, now: float) -> bool:
    """Reasoning that arrived this frame (`t`: when its first piece arrived, `now`: the clock,
    both time.perf_counter()) added to a streaming reply's row; False when there is no such row."""
    row = model.row_of(message_id)
    if row < 0 or not text:
        return False
    item = model.item(row)
    shown: ReasoningShown = item.reasoning or ReasoningShown("", live=True, started=t)
    if not shown.live and shown.thought_ms is None:  # a streaming row read back from the history: it thinks again
        shown = dataclasses.replace(shown, live=True, started=t)
    started = shown.started if shown.started is not None else t
    seconds = max(0, int(now - started)) if shown.live else shown.seconds
    model.update_message(
        dataclasses.replace(item, reasoning=dataclasses.replace(shown, text=shown.text + text, started=started, seconds=seconds))
    )
    return True


def end_reasoning(model: Any, message_id: str, thought_ms: float) -> None:
    """The reply's answer began (or it ended): its line reads "Thought for …"."""
    row = model.row_of(message_id)
    if row < 0 or model.item(row).reasoning is None or not model.item(row).reasoning.live:
        return
    item = model.item(row)
    model.update_message(
        dataclasses.replace(item, reasoning=dataclasses.replace(item.reasoning, live=False, thought_ms=max(0.0, thought_ms)))
    )


def tick_reasoning(model: Any, message_id: str, now: float) -> bool:
    """Move a thinking row's seconds to `now`; False when the row no longer thinks."""
    row = model.row_of(message_id)
    item = model.item(row) if row >= 0 else None
    shown = item.reasoning if item is not None else None
    if item is None or shown is None or not shown.live or shown.started is None or item.status != "streaming":
        return False
    seconds = max(0, int(now - shown.started))
    if seconds != shown.seconds:
        model.update_message(dataclasses.replace(item, reasoning=dataclasses.replace(shown, seconds=seconds)))
    return True


def toggle_reasoning(model: Any, message_id: str) -> bool:
    """Open a row's collapsed reasoning, or close it; False when the row has none."""
    row = model.row_of(message_id)
    if row < 0 or model.item(row).reasoning is None:
        return False
    item = model.item(row)
    model.update_message(dataclasses.replace(item, reasoning=dataclasses.replace(item.reasoning, expanded=not item.reasoning.expanded)))
    return True


# --- layout, paint, hits -----------------------------------------------------------------------


@dataclass
class ReasoningLayout:
    """Where the reasoning goes in a row (row coordinates): its line, and when open its text and
    the Copy link."""

    label: str
    expanded: bool
    line: QRect  # the chevron and the label: the click target
    doc: SafeTextDocument | None = None
    text: QRect = dataclasses.field(default_factory=QRect)
    copy: QRect = dataclasses.field(default_factory=QRect)

    @property
    def bottom(self) -> int:
        return (self.copy if self.expanded and not self.copy.isNull() else self.line).bottom()

    @property
    def area(self) -> QRect:
        return self.line.united(self.text).united(self.copy)


def layout_reasoning(
    shown: ReasoningShown,
    doc: SafeTextDocument | None,
    fm: QFontMetrics,
    fm_small: QFontMetrics,
    left: int,
    width: int,
    top: int,
    text_height: int,
) -> ReasoningLayout:
    """The line at `top`; when open, the text (`text_height` tall: its document's, or an estimate)
    and the Copy link under it."""
    label = shown.label
    line = QRect(left, top, min(width, CHEVRON + fm.horizontalAdvance(label) + 4), fm.height())
    lay = ReasoningLayout(label, shown.expanded, line, doc)
    if shown.expanded:
        lay.text = QRect(left + INDENT, line.bottom() + 1 + 4, max(1, width - INDENT), max(text_height, fm.height()))
        lay.copy = QRect(left + INDENT, lay.text.bottom() + 1 + 4, fm_small.horizontalAdvance(COPY_LABEL), fm_small.height())
    return lay


def text_width(width: int) -> int:
    """The width the reasoning text is laid out in, in a row whose text is `width` wide."""
    return max(40, width - INDENT)


def estimate_text_height(text: str, width: int, avg_char: float, line_spacing: int) -> int:
    """The reasoning text's height without laying it out (str.count runs in C)."""
    per_line = max(8, int(text_width(width) / avg_char))
    return (text.count("\n") + 1 + len(text) // per_line) * line_spacing


def paint_reasoning(
    painter: QPainter,
    lay: ReasoningLayout,
    font: QFont,
    small: QFont,
    text: QColor,
    muted: QColor,
    link: QColor,
    rule: QColor,
    visible: QRectF,
) -> None:
    """The chevron and label in `muted`; when open, a rule beside the text, the text, the link."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    line = lay.line
    cx, cy, r = line.left() + 5.0, line.center().y() + 0.5, 3.5
    points = (
        [QPointF(cx - r * 0.6, cy - r), QPointF(cx + r * 0.8, cy), QPointF(cx - r * 0.6, cy + r)]
        if not lay.expanded
        else [QPointF(cx - r, cy - r * 0.6), QPointF(cx + r, cy - r * 0.6), QPointF(cx, cy + r * 0.8)]
    )
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(muted)
    painter.drawPolygon(QPolygonF(points))
    painter.setFont(font)
    painter.setPen(muted)
    painter.drawText(
        QRect(line.left() + CHEVRON, line.top(), line.width() - CHEVRON, line.height()),
        int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
        lay.label,
    )
    if lay.expanded:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(rule)
        painter.drawRect(QRectF(line.left() + 4, lay.text.top(), 2, lay.text.height()))
        if lay.doc is not None:
            paint_document(painter, lay.doc, lay.text.topLeft(), text, visible)
        painter.setFont(small)
        painter.setPen(link)
        painter.drawText(lay.copy, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), COPY_LABEL)
    painter.restore()


def reasoning_hit(lay: ReasoningLayout | None, pos: QPoint, slop: int) -> str | None:
    """REASONING (the line) or COPY_REASONING (the link) for a point of the row, else None."""
    if lay is None:
        return None
    if lay.line.adjusted(-slop, -slop, slop, slop).contains(pos):
        return REASONING
    if lay.expanded and lay.copy.adjusted(-slop, -slop, slop, slop).contains(pos):
        return COPY_REASONING
    return None


def tooltip(shown: ReasoningShown) -> str:
    return "Hide the model's thinking" if shown.expanded else "Show the model's thinking (Enter)"


class ReasoningDocs:
    """The open reasoning texts as plain-text documents, by message id (an LRU). A reasoning that
    grows while open is appended to its document, not laid out again from the start."""

    def __init__(self) -> None:
        self._docs: OrderedDict[str, tuple[SafeTextDocument, str]] = OrderedDict()
        self.font = QFont()

    def clear(self) -> None:
        self._docs.clear()

    def document(self, message_id: str, text: str, width: int) -> SafeTextDocument:
        hit = self._docs.get(message_id)
        if hit is not None and hit[1] == text:
            doc = hit[0]
        elif hit is not None and text.startswith(hit[1]):
            doc = hit[0]
            cursor = QTextCursor(doc)
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(visible_text(text[len(hit[1]) :]))
        else:
            doc = SafeTextDocument()
            doc.setDocumentMargin(0)
            doc.setDefaultFont(self.font)
            option = QTextOption()
            option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # a long unbroken run wraps too
            doc.setDefaultTextOption(option)
            doc.setPlainText(visible_text(text))  # plain text: a tag in it is shown as written
        self._docs[message_id] = (doc, text)
        self._docs.move_to_end(message_id)
        if len(self._docs) > DOC_CACHE_SIZE:
            self._docs.popitem(last=False)
        if doc.textWidth() != width:
            doc.setTextWidth(width)
        return doc
