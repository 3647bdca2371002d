"""The conversation list's actions: the sidebar's list of conversations, kept up to date from the
history, and what the person asks of a conversation there, done through the history and the chat
controller: search and open a result, rename, pin, export to a file, delete (asked first, refused
while its reply streams). The main window builds one and wires its signals; it holds nothing else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QStatusBar, QWidget

from app.errors import describe_error
from app.store.export import export_conversation
from app.store.search import search_messages
from ui.chat.controller import ChatController
from ui.conversation.view import ConversationView
from ui.shell.sidebar import UNTITLED, Sidebar

EXPORT_SHOWN_MS = 4000  # how long the status bar says where an export went


class ConversationActions:
    """`sidebar`: the list and its requests; `controller`: the open conversation (and, through its
    core, the history and the database searched); `view`: scrolled to a chosen search result;
    `parent`: the dialogs' parent; `status`: where "Exported to ..." shows; `notice(sentence)`: why a
    delete was refused; `title_changed()`: the open conversation's title may have changed;
    `confirm_delete(title) -> bool`: asks before a delete (a question box unless given)."""

    def __init__(
        self,
        sidebar: Sidebar,
        controller: ChatController,
        view: ConversationView,
        parent: QWidget,
        *,
        status: QStatusBar,
        notice: Callable[[str], None],
        title_changed: Callable[[], None],
        confirm_delete: Callable[[str], bool] | None = None,
    ) -> None:
        self.sidebar = sidebar
        self.controller = controller
        self.view = view
        self.parent = parent
        self.status = status
        self.notice = notice
        self.title_changed = title_changed
        self.confirm_delete = confirm_delete or self._ask_delete
        self.history = controller.core.history

    def connect(self) -> None:
        """Act on the sidebar's requests."""
        s = self.sidebar
        s.search_changed.connect(self.search)
        s.search_result_chosen.connect(self.open_search_result)
        s.rename_requested.connect(self.rename)
        s.pin_requested.connect(self.pin)
        s.export_requested.connect(self.export)
        s.delete_requested.connect(self.delete)

    def refresh(self) -> None:
        """List the conversations the history holds now, the open one selected."""
        self.sidebar.set_conversations(self.history.list_conversations())
        self.sidebar.select_conversation(self.controller.conversation_id)

    def search(self, query: str) -> None:
        self.sidebar.show_search_results(search_messages(self.controller.core.db, query) if query.strip() else [])

    def open_search_result(self, conversation_id: str, message_id: str) -> None:
        self.controller.open_conversation(conversation_id, focus_message=message_id)
        self.view.scroll_to_message(message_id)

    def rename(self, conversation_id: str, title: str) -> None:
        self.history.rename_conversation(conversation_id, title)
        self.refresh()
        self.title_changed()

    def pin(self, conversation_id: str, pinned: bool) -> None:
        self.history.set_pinned(conversation_id, pinned)
        self.refresh()

    def export(self, conversation_id: str, fmt: str) -> None:
        """Ask where, then write the conversation as Markdown (`fmt` "md") or JSON."""
        conversation = self.history.get_conversation(conversation_id)
        suggested = f"{(conversation.title or 'conversation')[:40]}.{'md' if fmt == 'md' else 'json'}"
        path, _ = QFileDialog.getSaveFileName(self.parent, "Export conversation", suggested)
        if not path:
            return
        try:
            Path(path).write_text(export_conversation(self.history, conversation_id, fmt), encoding="utf-8")
        except OSError as exc:  # a folder the person may not write, a full disk: a sentence, the conversation untouched
            self.notice(f"The conversation was not exported: {describe_error(exc)}.")
            return
        self.status.showMessage(f"Exported to {path}", EXPORT_SHOWN_MS)

    def delete(self, conversation_id: str) -> None:
        """Delete once the person confirms; not the open conversation while its reply streams."""
        conversation = self.history.get_conversation(conversation_id)
        if self.controller.busy and conversation.id == self.controller.conversation_id:
            self.notice("Stop the reply before deleting this conversation.")
            return
        if not self.confirm_delete(conversation.title or UNTITLED):
            return
        self.history.delete_conversation(conversation.id)
        if conversation.id == self.controller.conversation_id:
            self.controller.new_conversation()
        self.refresh()

    def _ask_delete(self, title: str) -> bool:
        answer = QMessageBox.question(self.parent, "Delete conversation", f"Delete “{title}” and all its messages? This cannot be undone.")
        return answer == QMessageBox.StandardButton.Yes
