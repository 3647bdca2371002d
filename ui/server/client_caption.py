"""How a conversation an API client had is marked in the sidebar: a small muted caption with
the client's name ("editor · API") at the right end of its row, painted by the list's
delegate, so listing conversations costs no more than before."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from ui.theme import muted_color

CAPTION_ROLE = Qt.ItemDataRole.UserRole + 3  # "editor · API"; the sidebar's own roles are UserRole + 0..2


def api_caption(client: str) -> str:
    """The caption of a conversation an API client had; the keyless client is named "local API" already."""
    return client if client.endswith("API") else f"{client} · API"


class CaptionDelegate(QStyledItemDelegate):
    """Paints a conversation row; one with a caption gets it small and muted at its right end,
    the title elided before it. Rows without a caption are Qt's own paint."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        caption = index.data(CAPTION_ROLE)
        if not caption:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget else None
        if style is None:
            super().paint(painter, option, index)
            return
        small = QFont(opt.font)
        small.setPointSizeF(max(6.0, opt.font.pointSizeF() * 0.85))
        small_metrics = QFontMetrics(small)
        text_rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, opt.widget)
        width = min(small_metrics.horizontalAdvance(caption) + 4, text_rect.width() // 2)  # + rounding slack
        opt.text = QFontMetrics(opt.font).elidedText(opt.text, Qt.TextElideMode.ElideRight, text_rect.width() - width - 10)
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        painter.save()
        painter.setFont(small)
        painter.setPen(opt.palette.color(QPalette.ColorRole.HighlightedText) if selected else muted_color(opt.palette))
        painter.drawText(
            QRect(text_rect.right() - width, opt.rect.top(), width, opt.rect.height()),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            small_metrics.elidedText(caption, Qt.TextElideMode.ElideRight, width - 2),
        )
        painter.restore()
