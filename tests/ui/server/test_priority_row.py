"""The Server panel's priority choice: it shows the saved setting, a choice is saved at once
(and read by the window's next turn), and a read-only data folder says it was not saved."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QWidget

from app.settings import save_settings
from ui.server.feature import ServerFeature
from ui.server.priority_row import PriorityRow


def test_the_row_shows_and_saves_the_setting(qtbot, cove_core) -> None:
    row = PriorityRow(cove_core)
    qtbot.addWidget(row)
    assert row.window_first() and row.choice.currentText() == "The window's reply goes first"
    row.choice.setCurrentIndex(1)
    assert row.choice.currentText() == "All replies are treated equally"
    assert cove_core.settings.window_first is False
    row.choice.setCurrentIndex(0)
    assert cove_core.settings.window_first is True and row.note.text() == ""


def test_the_row_starts_from_the_saved_choice(qtbot, cove_core) -> None:
    save_settings(cove_core.paths.settings_file, replace(cove_core.settings, window_first=False))
    row = PriorityRow(cove_core)
    qtbot.addWidget(row)
    assert not row.window_first()


def test_a_read_only_folder_says_the_choice_is_not_saved(qtbot, cove_core, monkeypatch) -> None:
    row = PriorityRow(cove_core)
    qtbot.addWidget(row)
    monkeypatch.setattr(cove_core, "read_only", True)
    monkeypatch.setattr(cove_core, "notice", "the data folder is read-only")
    row.choice.setCurrentIndex(1)
    assert row.note.text() == "Not saved: the data folder is read-only"
    assert cove_core.settings.window_first is True


def test_the_server_panel_holds_the_row(qtbot, cove_core) -> None:
    parent = QWidget()
    qtbot.addWidget(parent)
    host = ServerFeature(parent, cove_core.db, lambda _port: None, port=1, core=cove_core)  # type: ignore[arg-type, return-value]
    panel = host.open()
    rows = panel.findChildren(PriorityRow)
    assert len(rows) == 1 and rows[0].isVisible()
    panel.close()
    bare = ServerFeature(parent, cove_core.db, lambda _port: None, port=1)  # type: ignore[arg-type, return-value]
    assert not bare.open().findChildren(PriorityRow)  # without the core: no row
    bare.panel.close()  # type: ignore[union-attr]
