"""Paints one message row (speaker, images, rendered text, status, metrics footer, action links) and hit-tests it.

The delegate never renders a row that is not painted. Row heights live in the model
(Qt.SizeHintRole, written here): an estimate until the row is first painted, then the exact
height. When painting finds a different exact height it tells the view, which writes it and
relayouts once, after the paint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPoint, QPointF, QRect, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QHelpEvent, QMouseEvent, QPainter, QPalette
from PySide6.QtWidgets import QAbstractItemView, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QToolTip

from app.statuses import MessageStatus
from ui.conversation.image_rows import IMAGE, image_hit, paint_images
from ui.conversation.image_rows import tooltip as image_tooltip
from ui.conversation.item_model import ConversationModel, MessageItem
from ui.conversation.reasoning_rows import REASONING, ReasoningDocs, paint_reasoning, reasoning_hit
from ui.conversation.reasoning_rows import text_width as reasoning_width
from ui.conversation.reasoning_rows import tooltip as reasoning_tooltip
from ui.conversation.row_layout import ALWAYS, NOT_SEEN_NOTE, REGENERATE_WITH, DocumentStore, Layouter, RowLayout, same_chrome
from ui.conversation.source_rows import SOURCE, paint_sources, source_hit, tooltip
from ui.conversation.streaming.reply import Damage
from ui.conversation.text.document_paint import anchor_areas, paint_document
from ui.conversation.text.markdown_render import COPY_SCHEME, LINK_SCHEME
from ui.conversation.text.safe_document import SafeTextDocument
from ui.conversation.thumbnails import ThumbnailCache
from ui.theme import is_dark

_HIT_SLOP = 3


@dataclass(frozen=True)
class Hit:
    """What a click at a point of a row means: an action, a link (its real URL) or a code copy."""

    kind: str  # copy | retry | regenerate | edit | version_prev | version_next | link | copy_code | source | open_source
    #            | reasoning (open or close the reply's thinking) | copy_reasoning | image (value: its place in the message)
    #            | regenerate_with (value: the model's name) | always (an Auto reply's model for its kind of task)
    message_id: str
    value: str = ""


def blend(a: QColor, b: QColor, t: float) -> QColor:
    """a mixed with t of b."""
    return QColor(
        round(a.red() * (1 - t) + b.red() * t), round(a.green() * (1 - t) + b.green() * t), round(a.blue() * (1 - t) + b.blue() * t)
    )


class MessageDelegate(QStyledItemDelegate):
    """Delegate for ConversationView; `hit_activated` carries the Hit of a click.

    sizeHint is deliberately not overridden: the list view reads each row's height from the
    model's Qt.SizeHintRole in C++ (no Python call per row). This delegate writes those heights:
    an estimate for rows never painted, the exact height once a row is laid out.
    """

    hit_activated = Signal(object)  # Hit
    heights_changed = Signal()  # exact heights differ from the ones the view placed rows with

    def __init__(self, view: QAbstractItemView) -> None:
        super().__init__(view)
        self._view = view
        self._model: ConversationModel | None = None
        self.refused_loads: list[str] = []
        self.docs = DocumentStore(on_refused=self.refused_loads.append)
        self.layouter = Layouter(view.font())
        self.docs.font = view.font()
        self.reasoning_docs = ReasoningDocs()  # replies' open reasoning, as plain text
        # The messages' images, scaled, by image and size; a picture that arrives repaints the rows.
        self.thumbnails = ThumbnailCache(self, on_loaded=lambda: view.viewport().update())
        self._layouts: dict[str, RowLayout] = {}
        self._laid: dict[str, int] = {}  # message id -> height written to the model
        self._dirty: set[str] = set()  # painted rows whose exact height is not written yet
        self._sizes: dict[int, QSize] = {}
        self._width: int | None = None
        self.layout_count = 0  # exact row layouts computed
        self.show_focus = False  # the view turns this on while the keyboard drives it
        self.paint_region: QRect | None = None  # the view's exposed rect during its paintEvent
        # Whether a widget over the row draws a streaming reply's text (message id, the text
        # area in viewport coordinates): the view's ReplySurface.
        self.text_drawn_over: Callable[[str, QRect], bool] = lambda message_id, rect: False

    # --- caches ----------------------------------------------------------------------------

    def reset_style(self) -> None:
        """Fonts or palette changed: drop everything rendered or measured."""
        self.layouter.set_font(self._view.font())
        self.docs.font = self._view.font()
        self.docs.dark = is_dark(self._view.palette())
        # What QListView gives the delegate for an enabled row: the Normal (Active) colour group.
        self.stream_text_color = self._view.palette().color(QPalette.ColorGroup.Active, QPalette.ColorRole.Text)
        self.docs.clear()
        self.reasoning_docs.font = self._view.font()
        self.reasoning_docs.clear()
        self._layouts.clear()

    def set_model(self, model: ConversationModel | None) -> None:
        self._model = model
        self._layouts.clear()
        self._laid.clear()

    def forget_missing(self) -> None:
        """Drop geometry of messages that left the model (documents stay in the LRU)."""
        if self._model is None:
            return
        ids = {item.id for item in self._model.items()}
        self._layouts = {k: v for k, v in self._layouts.items() if k in ids}
        self._laid = {k: v for k, v in self._laid.items() if k in ids}
        self.docs.forget_streams(ids)

    @property
    def render_count(self) -> int:
        """Markdown renders done so far (DocumentStore.render_count): what painting and scrolling cost."""
        return self.docs.render_count

    def row_width(self) -> int:
        # Cached: asked for every row in bulk passes; the view calls forget_width() on resize.
        if self._width is None:
            self._width = max(120, self._view.viewport().width())
        return self._width

    def forget_width(self) -> None:
        self._width = None

    def _item(self, index: QModelIndex | QPersistentModelIndex) -> MessageItem | None:
        model = self._model
        row = index.row()
        if model is None or not 0 <= row < model.item_count():
            return None
        return model.item(row)

    def layout_for(self, item: MessageItem, width: int | None = None) -> RowLayout:
        """The exact layout of a row (renders the message if it is not cached)."""
        width = self.row_width() if width is None else width
        lay = self._layouts.get(item.id)
        if lay is not None and self._is_current(lay, item, width):
            return lay
        doc, rendered = self.docs.document(item, self.layouter.text_width(width))
        reply = self.docs.stream(item.id) if item.status == MessageStatus.STREAMING else None
        height = round(doc.size().height() if reply is None else reply.height())
        thinking = item.reasoning
        reasoning_doc = (
            self.reasoning_docs.document(item.id, thinking.text, reasoning_width(self.layouter.text_width(width)))
            if thinking is not None and thinking.expanded
            else None
        )
        lay = self.layouter.layout(item, width, doc, rendered, height, reasoning_doc)
        self.layout_count += 1
        self._layouts[item.id] = lay
        return lay

    def _is_current(self, lay: RowLayout, item: MessageItem, width: int) -> bool:
        """Whether `lay` is the layout of `item` at `width`. A streaming row's layout holds
        while its reply's text grows within the room the row keeps for it (the reply draws the
        text; the row only places it), and its document has no render the layout has not seen."""
        if lay.width != width:
            return False
        if lay.item is item:
            return True
        if item.status != MessageStatus.STREAMING or lay.item.id != item.id or not same_chrome(lay.item, item):
            return False
        reply = self.docs.stream(item.id)
        return (
            reply is not None
            and reply.text == item.content
            and reply.rendered is lay.rendered
            and self.layouter.stream_room(round(reply.height())) == lay.doc_room
        )

    # --- a streaming reply's frames -------------------------------------------------------

    def append_streamed(self, item: MessageItem) -> Damage | None:
        """A streaming row's text changed (or a render of its tail came due): its reply shows
        `item`'s text. The damage in the reply's coordinates; None when the row has no reply
        laid out at this width yet, or the text does not extend it (lay the row out)."""
        reply = self.docs.stream(item.id)
        lay = self._layouts.get(item.id)
        if reply is None or lay is None or lay.width != self.row_width() or lay.doc is not reply.document:
            return None
        return reply.append(item.content)

    def keeps_room(self, item: MessageItem, height: float, *, text_only: bool = False) -> bool:
        """Whether a streaming row's layout holds for text `height` tall (else it grows).
        `text_only`: only the item's text changed since its layout (ConversationModel.append_text)."""
        lay = self._layouts.get(item.id)
        return (
            lay is not None
            and self.layouter.stream_room(round(height)) == lay.doc_room
            and (text_only or lay.item is item or same_chrome(lay.item, item))
        )

    def exact_height(self, index: QModelIndex) -> int:
        item = self._item(index)
        return 0 if item is None else self.layout_for(item).height

    def laid_height(self, message_id: str) -> int | None:
        """The height this row has in the model (what the view places it with)."""
        return self._laid.get(message_id)

    def is_laid_out(self, index: QModelIndex) -> bool:
        item = self._item(index)
        if item is None:
            return False
        lay = self._layouts.get(item.id)
        return lay is not None and self._is_current(lay, item, self.row_width())

    # --- heights in the model ----------------------------------------------------------------

    def write_heights(self, rows: range | list[int] | None = None, *, exact: bool = False, new_cells: bool = False) -> bool:
        """Give rows a height in the model: exact when laid out (or `exact`), else estimated.

        `new_cells`: the rows are new Qt cells (inserted, or after a reset) and have no height
        yet, whatever was written for the same message id before. A cell without one would be
        sized by QStyledItemDelegate from its text: slow, and wrong.
        Returns True when any height changed (the caller then schedules one relayout).
        """
        model = self._model
        if model is None:
            return False
        width = self.row_width()
        rows = range(model.item_count()) if rows is None else rows
        root = model.invisibleRootItem()
        items, layouts, laid, estimate = model.item, self._layouts, self._laid, self.layouter.estimate_height
        changed = False
        blocked = model.blockSignals(True)  # one relayout afterwards, not a signal per row
        try:
            for row in rows:
                item = items(row)
                lay = layouts.get(item.id)
                if exact:
                    height = self.layout_for(item, width).height
                elif lay is not None and self._is_current(lay, item, width):
                    height = lay.height
                else:
                    height = estimate(item, width)
                if new_cells or laid.get(item.id) != height:
                    laid[item.id] = height
                    root.child(row).setSizeHint(QSize(1, height))
                    changed = True
            if self._dirty:
                self._dirty.difference_update(items(row).id for row in rows)
        finally:
            model.blockSignals(blocked)
        return changed

    def size_for_new_row(self, item: MessageItem) -> QSize:
        """The size a row starts with (the model asks while it creates the row)."""
        width = self.row_width()
        lay = self._layouts.get(item.id)
        if lay is not None and lay.item is item and lay.width == width:
            height = lay.height
        else:
            height = self.layouter.estimate_height(item, width)
        self._laid[item.id] = height
        size = self._sizes.get(height)
        if size is None:
            size = self._sizes[height] = QSize(1, height)
        return size

    def settle_row(self, row: int) -> bool:
        """Lay the row out exactly and write its height; True when the height changed."""
        return self.write_heights([row], exact=True)

    def write_dirty(self) -> bool:
        """Write the exact heights found while painting."""
        if not self._dirty or self._model is None:
            self._dirty.clear()
            return False
        rows = [r for r in (self._model.row_of(i) for i in self._dirty) if r >= 0]
        self._dirty.clear()
        return self.write_heights(rows, exact=True)

    # --- QStyledItemDelegate ---------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        item = self._item(index)
        if item is None:
            return
        lay = self.layout_for(item)
        if self._laid.get(item.id) != lay.height and item.id not in self._dirty:
            # Never write to the model while painting: the view writes after this paint.
            self._dirty.add(item.id)
            QTimer.singleShot(0, self.heights_changed.emit)
        # The exposed part of this row, in row coordinates. A streaming token exposes only the
        # last lines of the reply: every drawText outside it would still shape its text before
        # the clip throws the result away, so parts outside it are not drawn at all.
        exposed = self.paint_region if self.paint_region is not None else self._view.viewport().rect()
        visible = QRectF(exposed).translated(-QPointF(option.rect.topLeft()))
        shown = visible.toAlignedRect()
        palette = option.palette
        text = palette.color(QPalette.ColorRole.Text)
        base = palette.color(QPalette.ColorRole.Base)
        dark = is_dark(palette)
        muted = blend(text, base, 0.42)
        link = QColor("#4493f8" if dark else "#0969da")
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.translate(option.rect.topLeft())
        if not item.seen_by_model:
            painter.setOpacity(0.55)
        if item.role == "user":
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(blend(base, palette.color(QPalette.ColorRole.Highlight), 0.10 if dark else 0.07))
            painter.drawRoundedRect(QRectF(lay.card), 8, 8)
        if self.show_focus and option.state & QStyle.StateFlag.State_HasFocus:
            painter.setPen(blend(base, palette.color(QPalette.ColorRole.Highlight), 0.7))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(lay.card).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8)

        if lay.header.intersects(shown):
            self._paint_header(painter, item, lay, text, muted, dark)
        if lay.reasoning is not None and lay.reasoning.area.intersects(shown):
            paint_reasoning(
                painter,
                lay.reasoning,
                self.layouter.font,
                self.layouter.small,
                blend(text, base, 0.25),
                muted,
                link,
                blend(text, base, 0.8),
                visible,
            )
        if lay.images is not None and lay.images.area.intersects(shown):
            frame, dpr = blend(text, base, 0.8), self._view.devicePixelRatioF()
            painter.setFont(self.layouter.small)
            paint_images(painter, lay.images, item.images, self.thumbnails, dpr, self.layouter.fm_small, frame, muted, shown)
        if lay.doc is not None:
            self._paint_text(painter, item, lay, lay.doc, option.rect, text, visible)
        if lay.notice is not None and lay.notice_rect.intersects(shown):
            painter.setFont(self.layouter.font)
            painter.setPen(self._status_color(item.status, dark, muted))
            painter.drawText(lay.notice_rect, int(Qt.TextFlag.TextWordWrap), lay.notice[0])
        if not lay.not_seen_rect.isNull() and lay.not_seen_rect.intersects(shown):
            painter.setFont(self.layouter.small)
            painter.setPen(muted)
            painter.drawText(lay.not_seen_rect, int(Qt.AlignmentFlag.AlignLeft), NOT_SEEN_NOTE)
        painter.setFont(self.layouter.small)
        if lay.metrics_text and lay.metrics_rect.intersects(shown):
            painter.setPen(muted)
            elided = self.layouter.fm_small.elidedText(lay.metrics_text, Qt.TextElideMode.ElideRight, lay.metrics_rect.width())
            painter.drawText(lay.metrics_rect, int(Qt.AlignmentFlag.AlignLeft), elided)
        if lay.sources is not None:
            paint_sources(painter, lay.sources, self.layouter.fm_small, text, muted, link)
        for kind, label, rect in lay.actions:
            if not rect.intersects(shown):
                continue
            enabled = self._action_enabled(item, kind)
            painter.setPen(link if enabled else muted)
            if kind in ("version_prev", "version_next"):
                painter.setFont(self.layouter.bold)
                painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), label)
                painter.setFont(self.layouter.small)
            else:
                painter.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), label)
        painter.restore()

    def _paint_text(
        self, painter: QPainter, item: MessageItem, lay: RowLayout, doc: SafeTextDocument, row_rect: QRect, color: QColor, visible: QRectF
    ) -> None:
        """The row's text: its document `doc` (the layout's), or a streaming row's reply (unless a
        widget over the row draws it)."""
        origin = QPoint(lay.doc_left, lay.doc_top)
        reply = self.docs.stream(item.id) if item.status == MessageStatus.STREAMING else None
        if reply is None or reply.document is not doc:
            paint_document(painter, doc, origin, color, visible)
            return
        area = QRect(row_rect.topLeft() + origin, QSize(math.ceil(doc.textWidth()) + 2, lay.doc_room))
        if self.text_drawn_over(item.id, area):
            return
        clip = visible.translated(-QPointF(origin))
        if clip.isEmpty():
            return
        painter.save()
        painter.translate(origin)
        reply.paint(painter, (clip.left(), clip.top(), clip.width(), clip.height()), color)
        painter.restore()

    def _paint_header(self, painter: QPainter, item: MessageItem, lay: RowLayout, text: QColor, muted: QColor, dark: bool) -> None:
        painter.setFont(self.layouter.bold)
        painter.setPen(text)
        painter.drawText(lay.header, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), lay.header_text)
        if lay.status_label:
            x = lay.header.left() + self.layouter.fm_bold.horizontalAdvance(lay.header_text) + 10
            painter.setFont(self.layouter.small)
            painter.setPen(self._status_color(item.status, dark, muted))
            painter.drawText(
                QRect(x, lay.header.top(), lay.header.width(), lay.header.height()),
                int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                lay.status_label,
            )

    @staticmethod
    def _status_color(status: str, dark: bool, muted: QColor) -> QColor:
        if status == MessageStatus.ERROR:
            return QColor("#f85149" if dark else "#cf222e")
        if status in (MessageStatus.CANCELLED, MessageStatus.INTERRUPTED, MessageStatus.LENGTH):
            return QColor("#d29922" if dark else "#9a6700")
        return muted

    @staticmethod
    def _action_enabled(item: MessageItem, kind: str) -> bool:
        if kind == "version_label":
            return False
        if kind == "version_prev":
            return item.version_index > 1
        if kind == "version_next":
            return item.version_index < item.version_count
        return True

    # --- hit testing -----------------------------------------------------------------------

    def action_regions(self, index: QModelIndex | QPersistentModelIndex, rect: QRect) -> dict[str, QRect]:
        """Clickable action areas of a row, in the coordinates `rect` (the row's visualRect) uses."""
        item = self._item(index)
        if item is None:
            return {}
        lay = self.layout_for(item)
        return {
            kind: r.translated(rect.topLeft()).adjusted(-_HIT_SLOP, -_HIT_SLOP, _HIT_SLOP, _HIT_SLOP)
            for kind, _label, r in lay.actions
            if self._action_enabled(item, kind)
        }

    def anchor_rects(self, index: QModelIndex, rect: QRect) -> list[tuple[str, QRect]]:
        """(href, area) of each anchor in the row's document (href is cove-link:N or cove-copy:N)."""
        item = self._item(index)
        if item is None:
            return []
        lay = self.layout_for(item)
        if lay.doc is None:
            return []
        origin = rect.topLeft() + QPoint(lay.doc_left, lay.doc_top)
        return [(href, area.translated(origin)) for href, area in anchor_areas(lay.doc)]

    def hit_test(self, index: QModelIndex | QPersistentModelIndex, rect: QRect, pos: QPoint) -> Hit | None:
        item = self._item(index)
        if item is None or not rect.contains(pos):
            return None
        for kind, region in self.action_regions(index, rect).items():
            if region.contains(pos):
                action, _, value = kind.partition(":")  # "regenerate_with:MODEL": the model is the hit's value
                return Hit(action, item.id, value)
        lay = self.layout_for(item)
        source = source_hit(lay.sources, pos - rect.topLeft(), _HIT_SLOP)
        if source is not None:
            return Hit(source[0], item.id, str(source[1]))
        thinking = reasoning_hit(lay.reasoning, pos - rect.topLeft(), _HIT_SLOP)
        if thinking is not None:
            return Hit(thinking, item.id)
        image = image_hit(lay.images, pos - rect.topLeft(), 0)
        if image is not None:
            return Hit(IMAGE, item.id, str(image))
        if lay.doc is None or lay.rendered is None:
            return None
        local = QPointF(pos - rect.topLeft() - QPoint(lay.doc_left, lay.doc_top))
        href = lay.doc.documentLayout().anchorAt(local)
        return _resolve_anchor(item.id, href, lay)

    def editorEvent(self, event: QEvent, model: object, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> bool:
        if (
            event.type() == QEvent.Type.MouseButtonRelease
            and isinstance(event, QMouseEvent)
            and event.button() == Qt.MouseButton.LeftButton
        ):
            hit = self.hit_test(index, option.rect, event.position().toPoint())
            if hit is not None:
                self.hit_activated.emit(hit)
                return True
        return False

    def helpEvent(
        self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> bool:
        if event is None or event.type() != QEvent.Type.ToolTip:
            return super().helpEvent(event, view, option, index)
        item = self._item(index)
        hit = self.hit_test(index, option.rect, event.pos())
        tip = ""
        if hit is not None and hit.kind == "link":
            tip = hit.value
        elif hit is not None and hit.kind == SOURCE and item is not None and item.sources is not None:
            line = item.sources.line(int(hit.value))
            tip = tooltip(line) if line is not None else ""
        elif hit is not None and hit.kind == REASONING and item is not None and item.reasoning is not None:
            tip = reasoning_tooltip(item.reasoning)
        elif hit is not None and hit.kind == REGENERATE_WITH:
            tip = f"A new version of this reply, written by {hit.value}; this one stays as the other version."
        elif hit is not None and hit.kind == ALWAYS and item is not None and item.always is not None:
            tip = f"Auto uses {item.always[0]} for {item.always[1]} from now on (Models → Settings can forget it)."
        elif hit is not None and hit.kind == IMAGE and item is not None:
            image = item.images[int(hit.value)]
            tip = image_tooltip(image, self.thumbnails.problem(image.sha256))
        elif item is not None:
            lay = self.layout_for(item)
            if lay.metrics_text and lay.metrics_rect.translated(option.rect.topLeft()).contains(event.pos()):
                tip = lay.metrics_text
        if tip:
            QToolTip.showText(event.globalPos(), tip, view)
        else:
            QToolTip.hideText()
        return True


def _resolve_anchor(message_id: str, href: str, lay: RowLayout) -> Hit | None:
    if not href or lay.rendered is None:
        return None
    scheme, _, number = href.partition(":")
    if not number.isdigit():
        return None
    n = int(number)
    if scheme == LINK_SCHEME and n < len(lay.rendered.links):
        return Hit("link", message_id, lay.rendered.links[n])
    if scheme == COPY_SCHEME and n < len(lay.rendered.code_blocks):
        return Hit("copy_code", message_id, lay.rendered.code_blocks[n])
    return None


__all__ = ["Hit", "MessageDelegate", "blend"]
