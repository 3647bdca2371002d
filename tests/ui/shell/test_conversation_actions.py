"""The conversation list's actions (ui/shell/conversation_actions.py) without a main window: the
sidebar lists what the history holds after a rename, a pin and a delete; a delete is asked first
and refused while the conversation's reply streams; an export writes the file the person chose
and says where."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMainWindow

from app.store.export import export_conversation
from ui.chat.controller import ChatController
from ui.conversation.view import ConversationView
from ui.shell import conversation_actions
from ui.shell.conversation_actions import ConversationActions
from ui.shell.sidebar import Sidebar


class Parts:
    """The actions with what they were given, and what they asked and said."""

    def __init__(self, qtbot, controller: ChatController) -> None:
        self.sidebar, self.view, self.window = Sidebar(), ConversationView(), QMainWindow()
        for widget in (self.sidebar, self.view, self.window):
            qtbot.addWidget(widget)
        self.notices: list[str] = []
        self.titles_changed = 0
        self.asked: list[str] = []
        self.answers: list[bool] = []
        self.actions = ConversationActions(
            self.sidebar,
            controller,
            self.view,
            self.window,
            status=self.window.statusBar(),
            notice=self.notices.append,
            title_changed=self._title_changed,
            confirm_delete=self._confirm,
        )
        self.actions.connect()

    def _title_changed(self) -> None:
        self.titles_changed += 1

    def _confirm(self, title: str) -> bool:
        self.asked.append(title)
        return self.answers.pop(0)

    def titles(self) -> list[str]:
        rows = self.sidebar.conversation_list
        return [rows.item(i).text() for i in range(rows.count())]


@pytest.fixture
def controller(qtbot, cove_core, fake_engine):
    c = ChatController(cove_core, fake_engine)
    c.start()
    yield c
    c.shutdown()


@pytest.fixture
def parts(qtbot, controller) -> Parts:
    return Parts(qtbot, controller)


def test_the_list_follows_rename_pin_and_a_confirmed_delete(parts: Parts, cove_core) -> None:
    history = cove_core.history
    first = history.create_conversation(title="First")
    second = history.create_conversation(title="Second")
    parts.actions.refresh()
    assert parts.titles() == ["Second", "First"]

    parts.sidebar.rename_requested.emit(first.id, "Renamed")
    assert history.get_conversation(first.id).title == "Renamed"
    assert parts.titles() == ["Second", "Renamed"]
    assert parts.titles_changed == 1

    parts.sidebar.pin_requested.emit(first.id, True)
    assert history.get_conversation(first.id).pinned
    assert parts.titles() == ["Renamed", "Second"]  # pinned on top

    parts.answers = [False, True]
    parts.sidebar.delete_requested.emit(first.id)  # the person says no
    assert parts.titles() == ["Renamed", "Second"]
    parts.sidebar.delete_requested.emit(first.id)
    assert parts.asked == ["Renamed", "Renamed"]
    assert parts.titles() == ["Second"]
    assert [c.id for c in history.list_conversations()] == [second.id]
    assert parts.notices == []


def test_the_streaming_conversation_is_not_deleted(qtbot, parts: Parts, controller, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_HOST_TPS", "20")
    monkeypatch.setenv("FAKE_HOST_WORDS", "400")  # 20 s of reply: it streams throughout the test
    with qtbot.waitSignal(controller.reply_text_received, timeout=15000):
        assert controller.send("a long story")
    streaming = controller.conversation_id
    parts.sidebar.delete_requested.emit(streaming)
    assert parts.notices == ["Stop the reply before deleting this conversation."]
    assert parts.asked == []  # refused before asking
    with qtbot.waitSignal(controller.reply_finished, timeout=15000):
        controller.stop()
    assert [c.id for c in controller.core.history.list_conversations()] == [streaming]


def test_export_writes_the_chosen_file_and_says_where(parts: Parts, cove_core, tmp_path, monkeypatch) -> None:
    conversation = cove_core.history.create_conversation(title="Holiday plans")
    target = tmp_path / "chosen.md"
    offered: list[str] = []

    class SaveDialog:  # the person picks `target` the first time, then cancels
        @staticmethod
        def getSaveFileName(_parent, caption: str, suggested: str) -> tuple[str, str]:  # noqa: N802 (Qt's name)
            offered.append(f"{caption}: {suggested}")
            return (str(target) if len(offered) == 1 else "", "")

    monkeypatch.setattr(conversation_actions, "QFileDialog", SaveDialog)
    parts.sidebar.export_requested.emit(conversation.id, "md")
    assert offered == ["Export conversation: Holiday plans.md"]
    assert target.read_text(encoding="utf-8") == export_conversation(cove_core.history, conversation.id, "md")
    assert parts.window.statusBar().currentMessage() == f"Exported to {target}"

    parts.window.statusBar().clearMessage()
    parts.sidebar.export_requested.emit(conversation.id, "json")  # the person cancels the dialog
    assert offered[1] == "Export conversation: Holiday plans.json"
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".md", ".json")) == ["chosen.md"]
    assert parts.window.statusBar().currentMessage() == ""


def test_an_export_the_folder_refuses_is_a_sentence(parts: Parts, cove_core, tmp_path, monkeypatch) -> None:
    conversation = cove_core.history.create_conversation(title="Holiday plans")
    cove_core.history.add_user_message(conversation.id, "Where shall we go?")
    target = tmp_path / "no-such-folder" / "chosen.md"  # the folder is gone by the time it is written

    class SaveDialog:
        @staticmethod
        def getSaveFileName(_parent, _caption: str, _suggested: str) -> tuple[str, str]:  # noqa: N802 (Qt's name)
            return (str(target), "")

    monkeypatch.setattr(conversation_actions, "QFileDialog", SaveDialog)
    parts.sidebar.export_requested.emit(conversation.id, "md")
    assert parts.notices == [f"The conversation was not exported: no such file: {target}."]
    assert parts.window.statusBar().currentMessage() == ""
    assert not target.exists()
    assert [m.content for m in cove_core.history.messages(conversation.id)] == ["Where shall we go?"]
