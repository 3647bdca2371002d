"""Documents in the main window: the chip above the composer attaches collections to the
conversation; a turn of a conversation with a collection is given its passages, and the reply shows
the sources it cites (file, page, the passage on hover and click, Open only after the person
agreed); a reply that cites none shows the passages it was given, labelled so; a file that is gone
gets a sentence."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, Qt, QUrl
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip

from app.docs.index_db import DocumentIndex
from app.docs.indexer import index_collection
from app.statuses import MessageStatus
from app.store.sources import Source, attached_collections, sources_of, write_sources
from tests.support.docs_corpus import LIGHTHOUSE, write_corpus
from tests.support.remote_window import send
from ui.chat.controller import ChatController
from ui.conversation.source_rows import CITED_TITLE, OPEN_SOURCE, SOURCE, UNCITED_TITLE, tooltip
from ui.shell.main_window import MainWindow

WAIT_MS = 30_000


def _window(qtbot, core, engine) -> MainWindow:
    window = MainWindow(
        ChatController(core, engine), state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json"
    )
    qtbot.addWidget(window)
    window.resize(1100, 760)
    window.show()
    window.start()
    return window


def _collection(core, root: Path, name: str = "papers") -> None:
    with DocumentIndex(core.paths.documents_database) as index:
        index.create(name, [root])
    index_collection(core.paths.documents_database, name, lower_priority=False)


def _action(window: MainWindow, text: str):
    window.documents.fill_menu()
    return next(a for a in window.documents.menu.actions() if a.text() == text)


def test_the_chip_attaches_and_detaches_collections(qtbot, cove_core, fake_engine, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nThe kestrel hovered.\n")
    _collection(cove_core, tmp_path / "notes", "notes")
    _collection(cove_core, tmp_path / "notes", "more notes")
    window = _window(qtbot, cove_core, fake_engine)
    chip = window.documents.chip
    assert chip.isVisible() and chip.text() == "Documents: none"
    assert (
        window.composer.parentWidget().layout().indexOf(chip) == window.composer.parentWidget().layout().indexOf(window.composer) - 1
    )  # just above the composer
    assert window.controller.conversation_id is None
    _action(window, "notes").setChecked(True)  # a new chat is written so it can keep its collections
    conversation_id = window.controller.conversation_id
    assert conversation_id is not None
    assert attached_collections(cove_core.db, conversation_id) == ["notes"]
    assert chip.text() == "Documents: notes"
    _action(window, "more notes").setChecked(True)
    assert sorted(attached_collections(cove_core.db, conversation_id)) == ["more notes", "notes"]
    assert _action(window, "notes").isChecked()
    _action(window, "notes").setChecked(False)
    assert attached_collections(cove_core.db, conversation_id) == ["more notes"]
    assert chip.text() == "Documents: more notes"
    window.new_chat()
    assert chip.text() == "Documents: none"
    assert not window.documents.worker.hold()
    window.controller.busy_changed.emit(True)  # a reply streams: indexing waits between files
    assert window.documents.worker.hold()
    window.controller.busy_changed.emit(False)
    assert not window.documents.worker.hold()


def _row_point(window: MainWindow, message_id: str, which: int, part: int) -> QPoint:
    """The centre of source line `which`'s text (part 1) or Open link (part 2), in viewport coordinates."""
    view = window.view
    model = view.conversation_model()
    row = model.row_of(message_id)
    lay = view.message_delegate().layout_for(model.item(row))
    assert lay.sources is not None
    rect = view.visualRect(model.index(row, 0))
    return lay.sources.lines[which][part].center() + rect.topLeft()


def test_a_turn_with_a_collection_shows_the_sources_its_reply_cites(qtbot, cove_core, fake_engine, tmp_path: Path, monkeypatch) -> None:
    corpus = write_corpus(tmp_path / "papers", bad=False)
    _collection(cove_core, corpus.root)
    fact = corpus.fact("lighthouse keeper")
    pieces = tmp_path / "pieces.json"
    pieces.write_text(json.dumps(["The keeper ", "counted 417 gulls ", "[1]."]))
    monkeypatch.setenv("FAKE_HOST_PIECES", str(pieces))
    window = _window(qtbot, cove_core, fake_engine)
    _action(window, "papers").setChecked(True)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        send(qtbot, window, "How many gulls did the lighthouse keeper count?")
    reply = done.args[0]
    assert reply.status == MessageStatus.COMPLETE
    given = sources_of(cove_core.db, reply.id)
    assert given and given[0].path.endswith(fact.path) and given[0].page == fact.page and given[0].cited
    assert LIGHTHOUSE in given[0].excerpt
    view = window.view
    qtbot.waitUntil(lambda: view.conversation_model().item(1).sources is not None, timeout=WAIT_MS)
    shown = view.conversation_model().item(1).sources
    assert shown.title == CITED_TITLE and [line.n for line in shown.lines] == [1]
    assert shown.lines[0].text == f"[1] report.pdf · page {fact.page}"
    assert LIGHTHOUSE in tooltip(shown.lines[0])

    # Open asks first (the full path); no means nothing opens; yes hands the file to the desktop.
    asked, opened = [], []
    sources = window.documents.sources
    sources.opener = opened.append
    sources.confirm = lambda line: asked.append(line.path) or False
    view.scrollToBottom()
    qtbot.wait(50)
    activated = []
    view.source_activated.connect(lambda *args: activated.append(args))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=_row_point(window, reply.id, 0, 2))
    assert activated == [(reply.id, OPEN_SOURCE, 1)]
    assert asked == [given[0].path] and opened == []
    sources.confirm = lambda line: True
    sources.activate(reply.id, OPEN_SOURCE, 1)
    assert opened == [QUrl.fromLocalFile(given[0].path)]

    # Hovering the line shows the passage; a click shows all of it.
    point = _row_point(window, reply.id, 0, 1)
    QApplication.sendEvent(view.viewport(), QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point)))
    assert LIGHTHOUSE in QToolTip.text() and given[0].path in QToolTip.text()
    QToolTip.hideText()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=_row_point(window, reply.id, 0, 1))
    assert activated[-1] == (reply.id, SOURCE, 1)
    assert sources.dialog is not None and LIGHTHOUSE in sources.dialog.text.toPlainText()
    sources.dialog.close()


def test_a_reply_citing_none_shows_what_it_was_given_and_a_missing_file_gets_a_sentence(
    qtbot, cove_core, fake_engine, tmp_path: Path
) -> None:
    history = cove_core.history
    conversation = history.create_conversation(model="tiny")
    user = history.add_user_message(conversation.id, "What do my notes say?")
    reply = history.start_assistant_message(
        conversation.id, parent_id=user.id, model_name="tiny", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(reply.id, "They do not say.", status=MessageStatus.COMPLETE, metrics={})
    gone = tmp_path / "gone.md"
    write_sources(
        cove_core.db,
        reply.id,
        [
            Source(
                n=1,
                collection="notes",
                path=str(gone),
                start=0,
                end=20,
                hash="ab",
                excerpt="Tomatoes after the frost.",
                cited=False,
                heading="Garden > Spring",
            ),
            Source(
                n=2,
                collection="notes",
                path=str(tmp_path / "b.pdf"),
                start=0,
                end=9,
                hash="cd",
                excerpt="Page two text.",
                cited=False,
                page=2,
            ),
        ],
    )
    window = _window(qtbot, cove_core, fake_engine)
    window.controller.open_conversation(conversation.id)
    model = window.view.conversation_model()
    qtbot.waitUntil(lambda: model.item_count() == 2 and model.item(1).sources is not None, timeout=WAIT_MS)
    shown = model.item(1).sources
    assert shown.title == UNCITED_TITLE
    assert [line.text for line in shown.lines] == ["[1] gone.md · Garden > Spring", "[2] b.pdf · page 2"]
    spoken = model.index(1, 0).data(Qt.ItemDataRole.AccessibleTextRole)
    assert spoken.endswith(f"{UNCITED_TITLE}: [1] gone.md · Garden > Spring; [2] b.pdf · page 2")
    window.documents.sources.confirm = lambda line: True
    assert not window.documents.sources.open_file(shown.lines[0])
    assert "gone.md is no longer at" in window.notice.text()


def test_a_collection_left_unfinished_is_brought_up_to_date_after_start_and_watched(qtbot, cove_core, fake_engine, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe kestrel hovered over the ditch.\n")
    with DocumentIndex(cove_core.paths.documents_database) as index:
        index.create("notes", [folder])  # made, never indexed: as after a run that was killed
    window = _window(qtbot, cove_core, fake_engine)
    worker = window.documents.worker

    def indexed() -> int:
        with DocumentIndex(cove_core.paths.documents_database) as index:
            return index.status("notes").files_indexed

    qtbot.waitUntil(lambda: indexed() == 1 and "notes" in worker.watchers, timeout=WAIT_MS)
    (folder / "b.md").write_text("# B\n\nThe heron waited by the sluice gate.\n")
    qtbot.waitUntil(lambda: indexed() == 2, timeout=WAIT_MS)
    window.close()
    assert worker.watchers == {}


def test_with_an_embedding_model_installed_the_collection_is_searched_by_meaning_too(
    qtbot, cove_core, fake_engine, tmp_path: Path, monkeypatch
) -> None:
    from tests.support.tiny_model import write_tiny_gguf

    cove_core.library.import_file(write_tiny_gguf(tmp_path / "embed.gguf", pooling_type=1, seed=1), name="embed")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe kestrel hovered over the ditch at noon.\n")
    (folder / "tides.md").write_text("# Tides\n\nSpring tides ran high at Harrow Point.\n")
    pieces = tmp_path / "pieces.json"
    pieces.write_text(json.dumps(["It hovered ", "at noon [1]."]))
    monkeypatch.setenv("FAKE_HOST_PIECES", str(pieces))  # before the window starts the engine host
    window = _window(qtbot, cove_core, fake_engine)
    page = window.documents.open().page
    page.add_paths([folder], None)
    qtbot.waitUntil(lambda: "by meaning (embed)" in page.progress.summary.text(), timeout=WAIT_MS)
    with DocumentIndex(cove_core.paths.documents_database) as index:
        status = index.status("notes")
    assert status.embedding_model == "embed" and status.vectors == status.chunks > 0
    window.documents.panel.close()
    _action(window, "notes").setChecked(True)
    with qtbot.waitSignal(window.controller.reply_finished, timeout=WAIT_MS) as done:
        send(qtbot, window, "When did the kestrel hover?")
    given = sources_of(cove_core.db, done.args[0].id)
    assert given and given[0].path.endswith("birds.md") and given[0].cited
