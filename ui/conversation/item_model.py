"""The list model behind the conversation view: one row per visible message of the branch.

Rows hold frozen MessageItem records; a change replaces the record, so a record's identity
is its revision (the delegate's caches rely on that). Streaming text arrives through
append_text, called once per frame with the coalesced text, and touches one row only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel

from app.statuses import MessageStatus
from app.store.message_images import KeptImage


@dataclass(frozen=True)
class MessageItem:
    """One message as the view shows it (the history store's record, flattened for display)."""

    id: str
    role: str  # "user" | "assistant" | "system" | "tool_call" (a call and its result, ui/conversation/tool_rows.py)
    content: str
    status: str  # a MessageStatus
    model_name: str | None
    metrics: dict = field(default_factory=dict)
    error: str | None = None
    version_index: int = 1  # 1-based position among the message's siblings
    version_count: int = 1
    seen_by_model: bool = True  # False when the context policy dropped this turn
    tool: Any = None  # a tool call's row: its ui.conversation.tool_rows.ToolShown (line, details, expanded)
    sources: Any = None  # a reply given document passages: its ui.conversation.source_rows.SourcesShown
    reasoning: Any = None  # a reply that thought first: its ui.conversation.reasoning_rows.ReasoningShown
    images: tuple[KeptImage, ...] = ()  # the person's images, in order (ui/conversation/image_rows.py)
    auto: str = ""  # a reply whose model Auto chose: "auto → MODEL: why" (ui/chat/auto_mode.py), first on its line
    regenerate_with: tuple[str, ...] = ()  # an Auto reply: the other models it can be regenerated with (ui/chat/auto_regenerate.py)
    always: tuple[str, str] | None = None  # an Auto reply: (its model, its kind in words) for "Always …" (ui/chat/auto_learning.py)


class MessageRole(IntEnum):
    """Custom data roles (Qt.UserRole + n)."""

    Item = Qt.ItemDataRole.UserRole + 1  # the MessageItem record


class ConversationModel(QStandardItemModel):
    """A flat list of MessageItem rows with an id -> row map.

    A QStandardItemModel rather than a QAbstractListModel on purpose: QListView asks every row
    for its size on every relayout, and with a Python data()/rowCount() each ask would be a
    Python call. Here the rows live in C++ and the view writes each row's height as
    Qt.SizeHintRole. Do not override data(), rowCount() or index() in Python.

    Note: item(row) returns the MessageItem (it shadows QStandardItemModel.item for Python callers).
    """

    text_appended = Signal(int)  # row: a streaming message's text grew (see append_text)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._items: list[MessageItem] = []
        self._rows: dict[str, int] = {}
        # Set by the view: the size a new row starts with (saves a second pass over new rows).
        self.row_size: Callable[[MessageItem], QSize] | None = None

    # --- reading -------------------------------------------------------------------------

    def item(self, row: int, column: int = 0) -> MessageItem:  # type: ignore[override]  # every row is a MessageItem (a narrower return than QStandardItemModel's)
        return self._items[row]

    def item_count(self) -> int:
        return len(self._items)

    def items(self) -> list[MessageItem]:
        return list(self._items)

    def row_of(self, message_id: str) -> int:
        """The row of a message, or -1."""
        return self._rows.get(message_id, -1)

    def cell(self, row: int) -> QStandardItem:
        """The Qt-side row (where the view keeps the row's height)."""
        return self.invisibleRootItem().child(row)

    # --- changing ------------------------------------------------------------------------

    def set_messages(self, items: list[MessageItem]) -> None:
        """Replace every row: one modelAboutToBeReset / modelReset pair, however many rows."""
        self.beginResetModel()
        blocked = self.blockSignals(True)  # the rows below are part of the reset, not inserts
        try:
            self.removeRows(0, self.rowCount())
            self._items = list(items)
            self._rows = {item.id: row for row, item in enumerate(self._items)}
            if self._items:
                self.invisibleRootItem().appendRows([_cell(item, self.row_size) for item in self._items])
        finally:
            self.blockSignals(blocked)
        self.endResetModel()

    def append_message(self, item: MessageItem) -> None:
        if item.id in self._rows:
            raise ValueError(f"message {item.id!r} is already in the conversation")
        self._items.append(item)
        self._rows[item.id] = len(self._items) - 1
        self.invisibleRootItem().appendRow(_cell(item, self.row_size))

    def append_text(self, message_id: str, text: str) -> None:
        """The streaming path: add text to one row and emit text_appended(row).

        Not setData + dataChanged: that converts the record to a QVariant, goes through
        QStandardItemModel's change machinery and QListView's handler, once per frame of every
        reply. The row's Qt cell keeps the record it was given until update_message() replaces
        it; model.item(row) is always current.
        """
        row = self._rows.get(message_id)
        if row is None or not text:
            return
        old = self._items[row]
        # The record with longer text, without dataclasses.replace(), which checks and
        # re-initialises every field, once per frame of every reply.
        new = object.__new__(MessageItem)
        new.__dict__.update(old.__dict__)
        new.__dict__["content"] = old.content + text
        self._items[row] = new
        self.text_appended.emit(row)

    def update_message(self, item: MessageItem) -> None:
        """Replace the row with the same id (e.g. the final text, status and metrics)."""
        row = self._rows.get(item.id)
        if row is None:
            raise KeyError(item.id)
        self._items[row] = item
        self.setItemData(
            self.index(row, 0),
            {
                MessageRole.Item: item,
                Qt.ItemDataRole.AccessibleTextRole: _accessible_text(item),
                Qt.ItemDataRole.AccessibleDescriptionRole: _accessible_hint(item),
            },
        )

    def remove_message(self, message_id: str) -> None:
        row = self._rows.get(message_id)
        if row is None:
            return
        del self._items[row]
        self._rows = {item.id: r for r, item in enumerate(self._items)}
        self.removeRows(row, 1)


def _cell(item: MessageItem, row_size: Callable[[MessageItem], QSize] | None) -> QStandardItem:
    cell = QStandardItem()
    cell.setData(item, MessageRole.Item)
    cell.setData(_accessible_text(item), Qt.ItemDataRole.AccessibleTextRole)
    if item.reasoning is not None:
        cell.setData(_accessible_hint(item), Qt.ItemDataRole.AccessibleDescriptionRole)
    if row_size is not None:
        cell.setSizeHint(row_size(item))
    return cell


def _accessible_text(item: MessageItem) -> str:
    text = item.content if len(item.content) <= 300 else item.content[:300] + "…"
    status = "" if item.status == MessageStatus.COMPLETE else f" ({item.status})"
    if item.reasoning is not None:  # ui/conversation/reasoning_rows.py's ReasoningShown: named, never read as the answer
        text = f"[{item.reasoning.label}, {'shown' if item.reasoning.expanded else 'collapsed'}] {text}"
    if item.images:
        n = len(item.images)
        text = f"[{n} image{'s' if n != 1 else ''}: " + "; ".join(i.describe() for i in item.images) + "] " + text
    if item.sources is not None:  # ui/conversation/source_rows.py's SourcesShown
        text += f" {item.sources.title}: " + "; ".join(line.text for line in item.sources.lines)
    return f"{speaker(item)}{status}: {text}"


def _accessible_hint(item: MessageItem) -> str:
    if item.reasoning is None:
        return ""
    return "Enter or Space hides the model's thinking" if item.reasoning.expanded else "Enter or Space shows the model's thinking"


def speaker(item: MessageItem) -> str:
    """Who wrote a message, as the view labels it."""
    if item.role == "user":
        return "You"
    if item.role == "system":
        return "System"
    return item.model_name or "Assistant"
