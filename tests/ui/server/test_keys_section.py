"""API keys made in the Server panel: the key is shown once (only its sha256 is kept), a bad or
taken name is refused in a sentence, and Remove takes a key away."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.serve.http.keys import ApiKeys
from ui.server.keys_section import SHOWN_ONCE, KeysSection
from ui.server.server_panel import ServerPanel


def _section(qtbot, db, names: list[str], answers: list[bool] | None = None) -> KeysSection:
    section = KeysSection(ApiKeys(db), ask_name=lambda: names.pop(0), confirm=lambda _q: (answers or [True]).pop(0))
    qtbot.addWidget(section)
    section.show()
    return section


def test_a_new_key_is_shown_once_and_works(qtbot, cove_core) -> None:
    section = _section(qtbot, cove_core.db, ["editor"])
    assert section.names() == [] and section.empty.isVisible()
    qtbot.mouseClick(section.new_button, Qt.MouseButton.LeftButton)
    key = section.key_field.text()
    assert key.startswith("cove-") and section.key_field.isReadOnly() and section.shown.isVisible()
    assert ApiKeys(cove_core.db).name_of(key) == "editor"  # the key made is the one stored (hashed)
    assert key not in str(list(cove_core.db.query("SELECT * FROM api_keys")))
    assert section.names() == ["editor"] and not section.empty.isVisible()
    assert any(label.text() == SHOWN_ONCE for label in section.shown.findChildren(type(section.shown_for)))
    qtbot.mouseClick(section.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == key
    section.forget_shown_key()
    assert section.key_field.text() == "" and not section.shown.isVisible()


def test_the_panel_forgets_the_key_when_it_closes(qtbot, cove_core) -> None:
    from ui.server.control import ServerControl

    section = KeysSection(ApiKeys(cove_core.db), ask_name=lambda: "scripts")
    panel = ServerPanel(ServerControl(lambda _p: None), section, port=8642)  # type: ignore[arg-type, return-value]
    qtbot.addWidget(panel)
    panel.show()
    qtbot.mouseClick(section.new_button, Qt.MouseButton.LeftButton)
    key = section.key_field.text()
    assert key.startswith("cove-")
    panel.close()
    panel.show()
    assert section.key_field.text() == "" and not section.shown.isVisible()
    assert all(key not in edit.text() for edit in panel.findChildren(type(section.key_field)))
    assert section.names() == ["scripts"]


def test_a_taken_or_bad_name_is_a_sentence(qtbot, cove_core) -> None:
    section = _section(qtbot, cove_core.db, ["editor", "editor", "no/slashes"])
    qtbot.mouseClick(section.new_button, Qt.MouseButton.LeftButton)
    first = section.key_field.text()
    qtbot.mouseClick(section.new_button, Qt.MouseButton.LeftButton)
    assert section.message.text().startswith("There is a key named 'editor' already")
    assert section.key_field.text() == "" and first not in section.message.text()
    qtbot.mouseClick(section.new_button, Qt.MouseButton.LeftButton)
    assert section.message.text().startswith("A key's name is 1 to 40 letters")
    assert ApiKeys(cove_core.db).names() == ["editor"] and ApiKeys(cove_core.db).name_of(first) == "editor"


def test_remove_takes_the_key_away_after_asking(qtbot, cove_core) -> None:
    ApiKeys(cove_core.db).add("editor")
    ApiKeys(cove_core.db).add("scripts")
    section = _section(qtbot, cove_core.db, [], answers=[False, True])
    assert section.names() == ["editor", "scripts"] and not section.remove_button.isEnabled()
    section.list.setCurrentRow(0)
    assert section.remove_button.isEnabled()
    qtbot.mouseClick(section.remove_button, Qt.MouseButton.LeftButton)  # answered No
    assert ApiKeys(cove_core.db).names() == ["editor", "scripts"]
    qtbot.mouseClick(section.remove_button, Qt.MouseButton.LeftButton)  # answered Yes
    assert ApiKeys(cove_core.db).names() == ["scripts"] and section.names() == ["scripts"]
