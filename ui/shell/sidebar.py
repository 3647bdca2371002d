"""The left sidebar: a New chat button, a search box over all messages, and the conversation list
with its per-conversation menu (rename, pin, export, delete); an API client's conversation has
a small caption with the client's name ("editor · API").

It only shows what it is given and emits what the person asked for; the owner runs the
search, changes the store and confirms deletions.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QPoint, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAbstractTextDocumentLayout, QKeyEvent, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.store.history import Conversation
from app.store.search import SearchHit
from ui.server.client_caption import CAPTION_ROLE, CaptionDelegate, api_caption
from ui.theme import blank_icon, pin_icon

SEARCH_DEBOUNCE_MS = 200
UNTITLED = "Untitled chat"
ID_ROLE = Qt.ItemDataRole.UserRole
HIT_ROLE = Qt.ItemDataRole.UserRole + 1  # (conversation_id, message_id)
HTML_ROLE = Qt.ItemDataRole.UserRole + 2


def snippet_html(snippet: str) -> str:
    """FTS snippet with its [ ] match markers turned into bold; everything else escaped."""
    out: list[str] = []
    bold = False
    for char in snippet:
        if char == "[" and not bold:
            out.append("<b>")
            bold = True
        elif char == "]" and bold:
            out.append("</b>")
            bold = False
        else:
            out.append(html.escape(char))
    if bold:
        out.append("</b>")
    return "".join(out)


def _plain_snippet(snippet: str) -> str:
    return snippet.replace("[", "").replace("]", "")


class _HitDelegate(QStyledItemDelegate):
    """Paints a search hit: the conversation title in bold over the snippet with matches in bold."""

    def _document(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        doc.setDocumentMargin(6)
        doc.setHtml(index.data(HTML_ROLE) or "")
        # Size and paint at the viewport's width: the rect handed to sizeHint varies.
        width = option.widget.viewport().width() if isinstance(option.widget, QAbstractItemView) else option.rect.width()
        doc.setTextWidth(max(50, width))
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        doc = self._document(option, index)
        context = QAbstractTextDocumentLayout.PaintContext()
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        context.palette.setColor(QPalette.ColorRole.Text, option.palette.color(role))
        painter.save()
        painter.translate(option.rect.topLeft())
        painter.setClipRect(QRectF(0, 0, option.rect.width(), option.rect.height()))
        doc.documentLayout().draw(painter, context)
        painter.restore()

    def sizeHint(
        self,
        option: QStyleOptionViewItem,  # noqa: N802 (Qt override)
        index: QModelIndex | QPersistentModelIndex,
    ) -> QSize:
        doc = self._document(option, index)
        return QSize(int(doc.idealWidth()), int(doc.size().height()) + 2)


class _ConversationList(QListWidget):
    """The list, with F2 to rename and Delete to ask for deletion from the keyboard."""

    key_action = Signal(str, str)  # (action, conversation_id)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        item = self.currentItem()
        if item is not None and self.state() != QAbstractItemView.State.EditingState:
            if event.key() == Qt.Key.Key_F2:
                self.key_action.emit("rename", item.data(ID_ROLE))
                return
            if event.key() == Qt.Key.Key_Delete:
                self.key_action.emit("delete", item.data(ID_ROLE))
                return
        super().keyPressEvent(event)


class Sidebar(QWidget):
    """New chat, search and the conversation list. Emits requests; never changes anything itself."""

    new_chat_requested = Signal()
    conversation_selected = Signal(str)
    search_changed = Signal(str)
    search_result_chosen = Signal(str, str)  # (conversation_id, message_id)
    rename_requested = Signal(str, str)  # (conversation_id, new title)
    pin_requested = Signal(str, bool)  # (conversation_id, pinned)
    export_requested = Signal(str, str)  # (conversation_id, 'md' | 'json')
    delete_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._conversations: dict[str, Conversation] = {}
        self._quiet = False  # set while the list is changed programmatically
        self._renaming: str | None = None

        self._new_chat = QPushButton("New chat", self)
        self._new_chat.setAccessibleName("New chat")
        self._new_chat.setToolTip("Start a new conversation")
        self._new_chat.clicked.connect(self.new_chat_requested)

        self._search = QLineEdit(self)
        self._search.setAccessibleName("Search messages")
        self._search.setPlaceholderText("Search messages")
        self._search.setClearButtonEnabled(True)
        self._search.textChanged.connect(self._on_search_text)
        self._search.installEventFilter(self)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(SEARCH_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._emit_search)

        self._list = _ConversationList(self)
        self._list.setAccessibleName("Conversations")
        self._list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)  # rename only via the menu / F2
        self._list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self._list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self._list.setIconSize(QSize(14, 14))
        self._list.setItemDelegate(CaptionDelegate(self._list))
        self._list.customContextMenuRequested.connect(self._on_context_menu)
        self._list.currentItemChanged.connect(self._on_current_changed)
        self._list.itemChanged.connect(self._on_item_edited)
        self._list.key_action.connect(self._on_key_action)

        self._results = QListWidget(self)
        self._results.setAccessibleName("Search results")
        self._results.setItemDelegate(_HitDelegate(self._results))
        self._results.setResizeMode(QListView.ResizeMode.Adjust)  # re-wrap hits when the width changes
        self._results.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._results.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self._results.itemActivated.connect(self._on_hit_chosen)
        self._results.itemClicked.connect(self._on_hit_chosen)

        self._stack = QStackedWidget(self)
        self._stack.addWidget(self._list)
        self._stack.addWidget(self._results)

        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(6, 6, 6, 6)
        self._layout.setSpacing(6)
        self._layout.addWidget(self._new_chat)
        self._layout.addWidget(self._search)
        self._layout.addWidget(self._stack, 1)

    # ---- what the person sees and uses (public handles) ---------------------------------

    @property
    def new_chat_button(self) -> QPushButton:
        """The New chat button at the top."""
        return self._new_chat

    @property
    def search_box(self) -> QLineEdit:
        """The "Search messages" box: typing searches after a pause, Esc clears it, Down enters the results."""
        return self._search

    @property
    def conversation_list(self) -> QListWidget:
        """The conversations, one row each (pinned first, then newest first); F2 renames, Delete asks to delete."""
        return self._list

    @property
    def results_list(self) -> QListWidget:
        """The search results shown in the list's place while the search box has text."""
        return self._results

    def add_footer(self, widget: QWidget) -> None:
        """Put `widget` (the Server entry) at the foot of the sidebar, below the list."""
        self._layout.addWidget(widget)

    # ---- conversations -----------------------------------------------------------------

    def set_conversations(self, conversations: Sequence[Conversation]) -> None:
        """Show these conversations, pinned first, then newest first; keeps the selection."""
        ordered = sorted(conversations, key=lambda c: c.updated_at, reverse=True)
        ordered.sort(key=lambda c: not c.pinned)  # stable: pinned on top, each group newest first
        selected = self.selected_conversation()
        self._conversations = {c.id: c for c in ordered}
        self._renaming = None
        pin = pin_icon(self.palette().color(QPalette.ColorRole.PlaceholderText))
        blank = blank_icon(14)
        row_height = self._list.fontMetrics().height() + 10
        self._quiet = True
        try:
            self._list.clear()
            for conversation in ordered:
                item = QListWidgetItem(conversation.title or UNTITLED)
                item.setData(ID_ROLE, conversation.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                item.setIcon(pin if conversation.pinned else blank)
                item.setSizeHint(QSize(0, row_height))
                if not conversation.title:
                    font = item.font()
                    font.setItalic(True)
                    item.setFont(font)
                details = [conversation.title or UNTITLED]
                if conversation.pinned:
                    details.append("Pinned")
                if conversation.model:
                    details.append(f"Model: {conversation.model}")
                if conversation.client:
                    item.setData(CAPTION_ROLE, api_caption(conversation.client))
                    details.append(f"From the API: {conversation.client}")
                details.append(f"Last active: {conversation.updated_at[:16].replace('T', ' ')}")
                item.setToolTip("\n".join(details))
                item.setData(
                    Qt.ItemDataRole.AccessibleTextRole,
                    ("Pinned: " if conversation.pinned else "")
                    + (conversation.title or UNTITLED)
                    + (f" ({api_caption(conversation.client)})" if conversation.client else ""),
                )
                self._list.addItem(item)
            if selected is not None:
                self._select_item(selected)
        finally:
            self._quiet = False

    def select_conversation(self, conversation_id: str | None) -> None:
        """Highlight a conversation (None: none) without emitting `conversation_selected`."""
        self._quiet = True
        try:
            self._select_item(conversation_id)
        finally:
            self._quiet = False

    def selected_conversation(self) -> str | None:
        item = self._list.currentItem()
        return item.data(ID_ROLE) if item is not None else None

    def conversation_ids(self) -> list[str]:
        """Ids in display order."""
        return [self._list.item(row).data(ID_ROLE) for row in range(self._list.count())]

    def begin_rename(self, conversation_id: str) -> None:
        """Open the inline editor on a conversation's title; committing emits `rename_requested`."""
        item = self._item(conversation_id)
        if item is None:
            return
        self._show_list()
        self._renaming = conversation_id
        self._list.setCurrentItem(item)
        self._list.editItem(item)

    def context_menu(self, conversation_id: str) -> QMenu:
        """The menu for one conversation (its actions emit the request signals)."""
        conversation = self._conversations[conversation_id]
        menu = QMenu(self)
        menu.setAccessibleName("Conversation actions")
        rename = menu.addAction("Rename…")
        rename.triggered.connect(lambda: self.begin_rename(conversation_id))
        pin_text = "Unpin" if conversation.pinned else "Pin to top"
        pin = menu.addAction(pin_text)
        pin.triggered.connect(lambda: self.pin_requested.emit(conversation_id, not conversation.pinned))
        menu.addSeparator()
        markdown = menu.addAction("Export as Markdown…")
        markdown.triggered.connect(lambda: self.export_requested.emit(conversation_id, "md"))
        as_json = menu.addAction("Export as JSON…")
        as_json.triggered.connect(lambda: self.export_requested.emit(conversation_id, "json"))
        menu.addSeparator()
        delete = menu.addAction("Delete…")
        delete.triggered.connect(lambda: self.delete_requested.emit(conversation_id))
        return menu

    # ---- search ------------------------------------------------------------------------

    def focus_search(self) -> None:
        """Put the cursor in the search box (Ctrl+K), selecting what is there."""
        self._search.setFocus()
        self._search.selectAll()

    def search_text(self) -> str:
        return self._search.text()

    def clear_search(self) -> None:
        """Empty the search box and return to the conversation list."""
        self._search.clear()

    def show_search_results(self, hits: Sequence[SearchHit]) -> None:
        """Show hits for the current query (ignored once the search box was cleared)."""
        if not self._search.text().strip():
            return
        self._results.clear()
        if not hits:
            empty = QListWidgetItem()
            empty.setFlags(Qt.ItemFlag.NoItemFlags)
            empty.setData(HTML_ROLE, "<i>No messages match.</i>")
            empty.setData(Qt.ItemDataRole.AccessibleTextRole, "No messages match.")
            self._results.addItem(empty)
        for hit in hits:
            title = hit.conversation_title or UNTITLED
            item = QListWidgetItem()
            item.setData(HIT_ROLE, (hit.conversation_id, hit.message_id))
            item.setData(HTML_ROLE, f"<b>{html.escape(title)}</b><br>{snippet_html(hit.snippet)}")
            plain = f"{title}: {_plain_snippet(hit.snippet)}"
            item.setData(Qt.ItemDataRole.AccessibleTextRole, plain)
            item.setToolTip(plain)
            self._results.addItem(item)
        self._stack.setCurrentWidget(self._results)

    def is_showing_results(self) -> bool:
        return self._stack.currentWidget() is self._results

    # ---- internals ---------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self._search and isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress:
            key = event.key()
            if key == Qt.Key.Key_Escape and self._search.text():
                self.clear_search()
                return True
            if key == Qt.Key.Key_Down and self.is_showing_results() and self._results.count():
                self._results.setFocus()
                self._results.setCurrentRow(0)
                return True
        return super().eventFilter(watched, event)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.PaletteChange and self._conversations:
            self.set_conversations(list(self._conversations.values()))  # repaint the pin marks
        super().changeEvent(event)

    def _on_search_text(self, text: str) -> None:
        if text.strip():
            self._debounce.start()  # restarts: one emission after typing pauses
        else:
            self._debounce.stop()
            self._show_list()

    def _emit_search(self) -> None:
        query = self._search.text().strip()
        if query:
            self.search_changed.emit(query)

    def _show_list(self) -> None:
        self._results.clear()
        self._stack.setCurrentWidget(self._list)

    def _on_hit_chosen(self, item: QListWidgetItem) -> None:
        ids = item.data(HIT_ROLE)
        if ids:
            self.search_result_chosen.emit(str(ids[0]), str(ids[1]))

    def _on_current_changed(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if not self._quiet and current is not None:
            self.conversation_selected.emit(current.data(ID_ROLE))

    def _on_item_edited(self, item: QListWidgetItem) -> None:
        if self._quiet:
            return
        conversation_id = item.data(ID_ROLE)
        if conversation_id != self._renaming:
            return
        self._renaming = None
        conversation = self._conversations.get(conversation_id)
        old = (conversation.title if conversation else None) or UNTITLED
        new = " ".join(item.text().split())
        if not new or new == old:
            self._quiet = True
            item.setText(old)  # nothing to ask for: show the title as it was
            self._quiet = False
            return
        self.rename_requested.emit(conversation_id, new)

    def _on_context_menu(self, pos: QPoint) -> None:
        item = self._list.itemAt(pos)
        if item is None:
            return
        menu = self.context_menu(item.data(ID_ROLE))
        menu.exec(self._list.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def _on_key_action(self, action: str, conversation_id: str) -> None:
        if action == "rename":
            self.begin_rename(conversation_id)
        elif action == "delete":
            self.delete_requested.emit(conversation_id)

    def _item(self, conversation_id: str | None) -> QListWidgetItem | None:
        for row in range(self._list.count()):
            item = self._list.item(row)
            if item.data(ID_ROLE) == conversation_id:
                return item
        return None

    def _select_item(self, conversation_id: str | None) -> None:
        item = self._item(conversation_id)
        if item is None:
            self._list.setCurrentRow(-1)  # no current row (what setCurrentItem(None) does)
            self._list.clearSelection()
        else:
            self._list.setCurrentItem(item)
