"""What the sidebar asks of a conversation, done for the main window: search and open a result,
rename, pin, export to a file, delete (asked first, refused while its reply streams)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.store.export import export_conversation
from app.store.search import search_messages


class ConversationActions:
    """`window`: the MainWindow (its sidebar, view, controller, core and notices; not imported here,
    which imports this). `confirm_delete(title) -> bool` asks before a delete (a question box unless given)."""

    def __init__(self, window: Any, confirm_delete: Callable[[str], bool] | None = None) -> None:
        self.window = window
        self.confirm_delete = confirm_delete or self._ask_delete

    def connect(self) -> None:
        s = self.window.sidebar
        s.search_changed.connect(self.search)
        s.search_result_chosen.connect(self.open_search_result)
        s.rename_requested.connect(self.rename)
        s.pin_requested.connect(self.pin)
        s.export_requested.connect(self.export)
        s.delete_requested.connect(self.delete)

    def search(self, query: str) -> None:
        w = self.window
        w.sidebar.show_search_results(search_messages(w.core.db, query) if query.strip() else [])

    def open_search_result(self, conversation_id: str, message_id: str) -> None:
        self.window.controller.open_conversation(conversation_id, focus_message=message_id)
        self.window.view.scroll_to_message(message_id)

    def rename(self, conversation_id: str, title: str) -> None:
        self.window.core.history.rename_conversation(conversation_id, title)
        self.window.refresh_conversations()
        self.window.update_title()

    def pin(self, conversation_id: str, pinned: bool) -> None:
        self.window.core.history.set_pinned(conversation_id, pinned)
        self.window.refresh_conversations()

    def export(self, conversation_id: str, fmt: str) -> None:
        w = self.window
        conversation = w.core.history.get_conversation(conversation_id)
        suggested = f"{(conversation.title or 'conversation')[:40]}.{ 'md' if fmt == 'md' else 'json'}"
        path, _ = QFileDialog.getSaveFileName(w, "Export conversation", suggested)
        if path:
            Path(path).write_text(export_conversation(w.core.history, conversation_id, fmt), encoding="utf-8")
            w.statusBar().showMessage(f"Exported to {path}", 4000)

    def _ask_delete(self, title: str) -> bool:
        answer = QMessageBox.question(self.window, "Delete conversation",
                                      f"Delete “{title}” and all its messages? This cannot be undone.")
        return answer == QMessageBox.StandardButton.Yes

    def delete(self, conversation_id: str) -> None:
        w = self.window
        conversation = w.core.history.get_conversation(conversation_id)
        if w.controller.busy and conversation.id == w.controller.conversation_id:
            w.show_notice("Stop the reply before deleting this conversation.")
            return
        if not self.confirm_delete(conversation.title or "Untitled chat"):
            return
        w.core.history.delete_conversation(conversation.id)
        if conversation.id == w.controller.conversation_id:
            w.controller.new_conversation()
        w.refresh_conversations()
