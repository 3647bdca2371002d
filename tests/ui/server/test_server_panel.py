"""The window's Server switch, driven as a person would (pytest-qt, offscreen) against a real
ServerThread on a free port and the tiny model: it starts and answers, the address is copied,
a request in flight shows in the live list, a taken port is a sentence with the switch left off,
turning it off (or quitting the window) stops answering."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.serve.http.runner import LoadedEngine, ServerThread
from ui.chat.controller import ChatController
from ui.server.control import OFF, ON
from ui.server.feature import ServerFeature
from ui.shell.main_window import MainWindow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _window(qtbot, core, engine, port: int) -> MainWindow:
    window = MainWindow(
        ChatController(core, engine),
        state_file=core.paths.data_dir / "window.ini",
        presets_file=core.paths.data_dir / "presets.json",
        server_factory=lambda p: ServerThread(core.paths, port=p),
    )
    qtbot.addWidget(window)
    window.server.port = port
    window.show()
    window.start()
    return window


@pytest.fixture
def host(qtbot, cove_core):
    """A ServerFeature in a bare widget, making real servers; stopped at the end."""
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    made: list[ServerThread] = []

    def factory(port: int) -> ServerThread:
        made.append(ServerThread(cove_core.paths, port=port))
        return made[-1]

    server_host = ServerFeature(parent, cove_core.db, factory, port=_free_port())
    yield server_host
    server_host.shutdown()
    assert server_host.wait_stopped(30)
    for server in made:
        server.stop()


def _turn_on(qtbot, host: ServerFeature):
    panel = host.open()
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: host.control.state != "starting", timeout=30000)
    assert host.control.state == ON, panel.state.text()
    return panel


def test_the_switch_starts_the_server_and_the_address_is_copied(qtbot, cove_core, fake_engine) -> None:
    port = _free_port()
    window = _window(qtbot, cove_core, fake_engine, port)
    assert window.server.control.state == OFF and window.server.button.text() == "Server off"  # off at every start
    qtbot.mouseClick(window.server.button, Qt.MouseButton.LeftButton)  # the sidebar's entry opens the panel
    panel = window.server.panel
    assert panel is not None and panel.isVisible() and not panel.switch.isChecked()
    assert panel.port.value() == port
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.server.control.state == ON, timeout=30000)
    address = f"http://127.0.0.1:{port}/v1"
    models = httpx.get(f"{address}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["auto", "tiny-llama"]
    assert panel.address.text() == address and not panel.port.isEnabled()
    assert window.server.button.text() == f"Server on · 127.0.0.1:{port}"
    assert panel.timer.isActive()  # refreshing while shown and on
    QGuiApplication.clipboard().setText("something else")
    qtbot.mouseClick(panel.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == address

    panel.hide()
    assert not panel.timer.isActive()  # hidden: no polling
    window.close()  # quitting with the server on stops it
    assert window.server.wait_stopped(30)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{address}/models", timeout=5)


def test_a_request_in_flight_shows_in_the_live_list(qtbot, host: ServerFeature) -> None:
    panel = _turn_on(qtbot, host)
    address = host.control.address
    done = threading.Event()
    replies: list[int] = []

    def keep_asking() -> None:  # one streamed reply after another, until the test has seen one
        while not done.is_set():
            body = {"model": "tiny-llama", "messages": [{"role": "user", "content": "tell me more"}], "max_tokens": 200, "stream": True}
            with httpx.stream("POST", f"{address}/chat/completions", json=body, timeout=60) as reply:
                replies.append(reply.status_code)
                for _line in reply.iter_lines():
                    if done.is_set():
                        break  # the client leaves: the server cancels the reply

    asking = threading.Thread(target=keep_asking, daemon=True)
    asking.start()
    try:

        def running_row() -> bool:
            rows = panel.request_rows()
            return any(r[:4] == ("local API", "tiny-llama", "/v1/chat/completions", "running") for r in rows)

        qtbot.waitUntil(running_row, timeout=30000)  # the panel's own 250 ms timer fills the list
        assert any(line.startswith("tiny-llama — ") for line in panel.engine_lines())
        assert "loaded tiny-llama" in panel.events.toPlainText()
    finally:
        done.set()
        asking.join(60)
    assert replies and set(replies) == {200}
    qtbot.waitUntil(lambda: panel.request_rows() == [], timeout=30000)  # answered or left: the row goes
    assert panel.no_requests.isVisible()


def test_a_taken_port_is_a_sentence_and_the_switch_stays_off(qtbot, host: ServerFeature) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        host.port = taken.getsockname()[1]
        panel = host.open()
        qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: host.control.state == OFF, timeout=30000)
    assert "in use" in panel.state.text() and str(host.port) in panel.state.text()
    assert not panel.switch.isChecked() and panel.switch.isEnabled() and panel.port.isEnabled()
    assert host.button.text() == "Server off: could not start"
    assert not panel.copy_button.isEnabled()


def test_turning_it_off_stops_answering(qtbot, host: ServerFeature) -> None:
    panel = _turn_on(qtbot, host)
    address = host.control.address
    assert httpx.get(f"{address}/models", timeout=10).status_code == 200
    qtbot.mouseClick(panel.switch, Qt.MouseButton.LeftButton)
    assert not panel.switch.isChecked() and not panel.switch.isEnabled()  # stopping, off the UI thread
    qtbot.waitUntil(lambda: host.control.state == OFF, timeout=30000)
    assert panel.state.text() == "Off" and panel.switch.isEnabled() and not panel.timer.isActive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{address}/models", timeout=5)
    _turn_on(qtbot, host)  # and on again, with a new server on the same port
    assert httpx.get(f"{address}/models", timeout=10).status_code == 200


class _ScriptedServer:
    """A stand-in with the snapshots of a server loading a model for a waiting request."""

    address = "http://127.0.0.1:1/v1"
    error = None
    running = True

    def start(self, timeout_s: float = 0) -> None:
        return None

    def stop(self, timeout_s: float = 0) -> None:
        self.running = False

    def live(self):
        from app.serve.pool.pool import LiveRequest

        return [LiveRequest(1, "editor", "big-model", "/v1/chat/completions", "loading", 0, 0.0)]

    def loaded(self):
        return [
            LoadedEngine("big-model", True, False),
            LoadedEngine("small-model", False, True, 3, 4),
            LoadedEngine("one-slot", False, True, 1, 1),
            LoadedEngine("idle", False, False, 0, 4),
        ]

    def events(self):
        return ["loading big-model", "loading big-model (copy 2)"]


def test_loading_shows_in_the_panel(qtbot) -> None:
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    host = ServerFeature(parent, _no_keys_db(), lambda _port: _ScriptedServer(), port=1)
    panel = _turn_on(qtbot, host)
    qtbot.waitUntil(lambda: panel.request_rows() != [], timeout=5000)
    assert panel.request_rows() == [("editor", "big-model", "/v1/chat/completions", "loading", "0")]
    assert panel.engine_lines() == [
        "big-model — loading…",
        "small-model — answering 3 of 4 at once",
        "one-slot — answering",
        "idle — ready, 4 at once",
    ]
    assert panel.events.toPlainText().splitlines() == ["loading big-model", "loading big-model (copy 2)"]
    host.shutdown()
    assert host.wait_stopped(10)


def _no_keys_db():
    import sqlite_utils

    db = sqlite_utils.Database(memory=True)
    db["api_keys"].create({"name": str, "key_sha256": str, "created_at": str}, pk="name")
    db["conversations"].create({"id": str, "updated_at": str, "client": str}, pk="id")
    return db
