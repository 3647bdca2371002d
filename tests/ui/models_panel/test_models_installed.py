"""The Models panel, part two (pytest-qt, offscreen): installed models (facts, import by dialog
and drop, delete), the measured memory beside the estimate, the token field, the models folder,
and the window's Models button, Ctrl+M, quit path and model switching."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QLineEdit

from app.downloads import resumable
from app.hub_token import MemoryToken, TokenStore
from tests.support.fake_hub import VALID_TOKEN, Fault
from tests.support.keyrings import InMemoryKeyring, PlaintextKeyring
from tests.support.models_panel import FILE, REPO, WAIT_MS, Confirmations, make_panel
from tests.support.tiny_model import write_tiny_gguf
from ui.models_panel.hub_settings import HubSettingsPage

# ---- installed models -------------------------------------------------------------------


def test_installed_models_show_their_facts_and_import_adds_a_file(qtbot, panel, cove_core, tmp_path):
    (row,) = panel.installed_view.rows()
    assert row[0] == "tiny-llama" and row[3] == "llama" and row[5].startswith("Imported: ")
    extra = write_tiny_gguf(tmp_path / "dropped-Q8_0.gguf", seed=3)
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        panel.import_files([str(extra)])
    assert "dropped-Q8_0" in panel.installed_view.names()
    assert cove_core.library.get("dropped-Q8_0").path == str(extra)

    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with qtbot.waitSignal(panel.importer.failed, timeout=WAIT_MS):
        panel.import_files([str(junk)])
    assert panel.message_text().startswith("junk.gguf was not imported")
    assert "junk" not in panel.installed_view.names()


def test_delete_asks_first_refuses_the_model_in_use_and_keeps_a_file_cove_does_not_own(qtbot, cove_core, hub, tmp_path):
    confirm = Confirmations(answer=False)
    panel = make_panel(qtbot, cove_core, confirm=confirm)
    other = cove_core.library.import_file(write_tiny_gguf(tmp_path / "other.gguf", seed=5))
    panel.refresh_installed()
    panel.set_current_model("tiny-llama")
    panel.delete_model("tiny-llama")
    assert "in use" in panel.message_text() and confirm.asked == []

    panel.delete_model(other.name)  # answered No: nothing happens
    assert confirm.asked and "The file stays where it is" in confirm.asked[0][1]
    assert other.name in panel.installed_view.names()
    confirm.answer = True
    panel.installed_view.select(other.name)
    panel.installed_view.delete_button.click()
    assert other.name not in panel.installed_view.names()
    assert Path(other.path).exists()  # registered in place: the person's file stays


def test_after_a_model_loads_its_measured_memory_shows_beside_the_estimate(qtbot, panel, cove_core):
    model = cove_core.library.get("tiny-llama")
    panel.set_loaded(model, os.getpid(), 512)  # this process stands in for the engine
    qtbot.waitUntil(lambda: "measured" in panel.installed_view.memory_text(), timeout=WAIT_MS)
    text = panel.installed_view.memory_text()
    assert text.startswith("Memory of tiny-llama at 512 tokens: estimated ")
    assert "with the context full" in text and "mapped model" in text


# ---- the token field ----------------------------------------------------------------------


def _all_text(widget) -> str:
    return "\n".join(
        [w.text() for w in widget.findChildren(QLineEdit)]
        + [w.text() for w in widget.findChildren(QLabel)]
        + [w.toolTip() for w in widget.findChildren(QLabel)]
    )


def test_token_field_saves_to_the_keyring_and_never_shows_the_token(qtbot, cove_core):
    keyring = InMemoryKeyring()
    store = TokenStore(keyring, MemoryToken())
    page = HubSettingsPage(cove_core, store)
    qtbot.addWidget(page)
    assert page.token_field.echoMode() == QLineEdit.EchoMode.Password
    qtbot.keyClicks(page.token_field, VALID_TOKEN)
    qtbot.mouseClick(page.save_token_button, Qt.MouseButton.LeftButton)
    assert keyring.passwords == {("cove", "huggingface"): VALID_TOKEN}
    assert page.token_field.text() == ""
    assert VALID_TOKEN not in _all_text(page)
    assert page.token_status.text().startswith("A token is saved in the ")

    again = HubSettingsPage(cove_core, TokenStore(keyring, MemoryToken()))  # the next time Settings opens
    qtbot.addWidget(again)
    assert again.token_field.text() == "" and VALID_TOKEN not in _all_text(again)
    assert again.remove_token_button.isEnabled()
    again.remove_token()
    assert keyring.passwords == {} and again.token_status.text().startswith("No token saved")


def test_token_without_a_secure_keyring_is_kept_in_memory_and_says_so(qtbot, cove_core):
    keyring = PlaintextKeyring()
    store = TokenStore(keyring, MemoryToken())
    page = HubSettingsPage(cove_core, store)
    qtbot.addWidget(page)
    note = page.save_token(VALID_TOKEN)
    assert "kept in memory for this run only" in note and note == page.token_note_text()
    assert keyring.passwords == {} and store.get() == VALID_TOKEN
    assert VALID_TOKEN not in _all_text(page)
    bad = page.save_token("not a token")
    assert bad.startswith("That is not a Hugging Face") and "not a token" not in bad


def test_models_folder_setting_moves_new_downloads(qtbot, panel, cove_core, tmp_path):
    page = panel.settings_page
    assert page.set_models_dir(tmp_path / "elsewhere")
    assert cove_core.models_dir == (tmp_path / "elsewhere").resolve()
    assert page.folder_field.text() == str((tmp_path / "elsewhere").resolve())
    assert page.set_models_dir(None) and cove_core.settings.models_dir is None


# ---- the window -------------------------------------------------------------------------


def test_window_opens_the_panel_with_ctrl_m_and_quitting_stops_a_download(qtbot, cove_core, fake_engine, hub):
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    hub.set_fault(REPO, FILE, Fault(stall_after=200_000, stall_s=30))
    window = MainWindow(
        ChatController(cove_core, fake_engine),
        state_file=cove_core.paths.data_dir / "w.ini",
        presets_file=cove_core.paths.data_dir / "p.json",
        token_store=TokenStore(InMemoryKeyring(), MemoryToken()),
    )
    qtbot.addWidget(window)
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    assert window.models_panel is None
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    panel = window.models_panel
    assert panel is not None and panel.isVisible()
    assert window.models_button.accessibleName() == "Models"
    with qtbot.waitSignal(window.downloads.model_installed, timeout=WAIT_MS):
        window.downloads.start(REPO, ["tiny-Q4_K_M.gguf"], None)
    assert "tiny-Q4_K_M" in window.picker.names()  # a finished download is in the model picker at once

    key = window.downloads.start(REPO, [FILE], None)
    qtbot.waitUntil(lambda: window.downloads.row(key).bytes_done >= 200_000, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "downloading" in window.network_indicator.text_shown(), timeout=WAIT_MS)
    handle = window.downloads.handle(key)
    assert handle is not None and handle.pid is not None and psutil.pid_exists(handle.pid)
    window.close()
    hub.release_stalls()
    assert not psutil.pid_exists(handle.pid)  # the download child is gone (reaped) when close returns
    assert handle.state == "paused"  # its partial file stays for the next start
    assert [d.filenames for d in resumable(cove_core.paths)] == [(FILE,)]  # offered at the next start


def test_switching_from_the_panel_loads_and_a_failed_load_keeps_the_previous_model(qtbot, cove_core, fake_engine, tmp_path):
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    broken = cove_core.library.import_file(write_tiny_gguf(tmp_path / "broken-Q8_0.gguf", seed=9))
    window = MainWindow(
        ChatController(cove_core, fake_engine),
        state_file=cove_core.paths.data_dir / "w.ini",
        presets_file=cove_core.paths.data_dir / "p.json",
        token_store=TokenStore(InMemoryKeyring(), MemoryToken()),
    )
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.controller.model_loaded, timeout=WAIT_MS):
        window.start()
    panel = window.open_models("Installed")
    assert panel.tabs.tabText(panel.tabs.currentIndex()) == "Installed"
    # The loaded model's estimate beside what its engine process holds.
    qtbot.waitUntil(lambda: "measured" in panel.installed_view.memory_text(), timeout=WAIT_MS)
    assert panel.installed_view.memory_text().startswith("Memory of tiny-llama at ")

    panel.installed_view.select(broken.name)
    assert panel.installed_view.use_button.isEnabled()
    with qtbot.waitSignal(window.controller.model_load_failed, timeout=WAIT_MS) as failed:
        panel.installed_view.use_button.click()
    assert failed.args[0] and panel.message_text() == failed.args[0]
    assert window.controller.model.name == "tiny-llama"  # the model that worked is still the one used
    assert window.picker.status_text() == failed.args[0]
    rows = {r[0]: r for r in panel.installed_view.rows()}
    assert set(rows) == {"tiny-llama", broken.name}
    window.close()


def test_dropping_gguf_files_on_the_installed_list_imports_them(qtbot, panel, cove_core, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    dropped = write_tiny_gguf(tmp_path / "dragged.gguf", seed=11)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(dropped)), QUrl.fromLocalFile(str(tmp_path / "notes.txt"))])
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        panel.installed_view.tree.dropEvent(event)
    assert event.isAccepted()
    assert "dragged" in panel.installed_view.names() and cove_core.library.get("dragged").path == str(dropped)
