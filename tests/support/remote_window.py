"""Set-up for the window's remote-connection tests: llama-cpp-python's own server on the tiny
model (one per test module), the main window on the scripted fake engine (which a remote turn
must never start), a connection added and probed through app/remote, and the picker steps a
person takes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt

from app.remote.probe import probe
from tests.support.keyrings import InMemoryKeyring, use_keyring
from tests.support.llama_cpp_server import LlamaCppServer, llama_cpp_server
from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow

KEY = "sk-cove-window-canary-7d41e2"  # the server's key: never in a file under COVE_HOME
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppServer]:
    """llama-cpp-python's server on 127.0.0.1 with the tiny model; every request needs KEY."""
    with llama_cpp_server(tmp_path_factory.mktemp("llama-cpp-server"), api_key=KEY, n_ctx=2048) as served:
        yield served


@pytest.fixture
def keyring_backend() -> Iterator[InMemoryKeyring]:
    with use_keyring(InMemoryKeyring()) as backend:
        yield backend  # type: ignore[misc]


def make_window(qtbot, core, engine, *, ask_consent=None) -> MainWindow:
    controller = ChatController(core, engine)
    if ask_consent is not None:
        controller.provide_consent(ask_consent)
    window = MainWindow(controller, state_file=core.paths.data_dir / "window.ini", presets_file=core.paths.data_dir / "presets.json")
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window


def add_connection(core, name: str, url: str, key: str | None = KEY, *, probed: bool = True):
    """A stored connection, its server asked for its models (here, as the window's probe thread would)."""
    connection = core.connections.add(name, url, key)
    if probed:
        connection = core.connections.record_probe(name, probe(connection, key, core.network))
    return connection


def remember(core, name: str) -> None:
    """Make `name` the model the window starts with (as choosing it in an earlier run did)."""
    from app.settings import save_settings

    save_settings(core.paths.settings_file, core.settings.with_last_model(name))


def choose(window: MainWindow, name: str) -> None:
    """Pick `name` in the top bar's model picker, as a click on its row does."""
    combo = window.picker.combo
    window.refresh_models()
    index = combo.findData(name)
    assert index >= 0, f"{name} is not in the picker: {window.picker.names()}"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def send(qtbot, window: MainWindow, text: str) -> None:
    box = window.composer.text_box  # the text box itself: offscreen, focus may sit in another window
    window.composer.focus_input()
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)
