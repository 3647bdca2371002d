"""The window and its server share the window's engine: an API request for the model the window
has loaded is answered by that engine (no second process), and a turn of the window sent while
an API reply streams waits for it, then runs on the same engine."""

from __future__ import annotations

import socket
import threading

import httpx

from app.engine.client import EngineClient
from ui.chat.controller import ChatController
from ui.server.control import ON
from ui.server.shared_engine import sharing_server_factory
from ui.shell.main_window import MainWindow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_api_requests_use_the_windows_engine_and_the_window_waits_its_turn(qtbot, cove_core) -> None:
    engine = EngineClient()
    controller = ChatController(cove_core, engine)
    window = MainWindow(
        controller,
        state_file=cove_core.paths.data_dir / "window.ini",
        presets_file=cove_core.paths.data_dir / "presets.json",
        server_factory=sharing_server_factory(cove_core, controller),
    )
    qtbot.addWidget(window)
    window.server.port = _free_port()
    window.show()
    window.start()
    try:
        with qtbot.waitSignal(controller.reply_finished, timeout=60_000):
            controller.send("hello from the window")  # loads the tiny model in the window's engine
        window.server.control.turn_on(window.server.port)
        qtbot.waitUntil(lambda: window.server.control.state == ON, timeout=30_000)
        server = window.server.control.server
        base = server.address
        pid = engine.host_pid
        reply = httpx.post(
            f"{base}/chat/completions",
            timeout=60,
            json={"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        )
        assert reply.status_code == 200 and server.loaded() == []  # the window's engine answered it
        assert engine.host_pid == pid

        lines: list[str] = []
        body = {"model": "tiny-llama", "messages": [{"role": "user", "content": "go on"}], "max_tokens": 300, "stream": True}

        def stream() -> None:
            with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=60) as response:
                lines.extend(response.iter_lines())

        # The tiny model streams 300 tokens in a few tens of ms, and may end its reply sooner:
        # start API replies until one is seen streaming, so the window's turn below is sent during it.
        for _attempt in range(10):
            lines.clear()
            reader = threading.Thread(target=stream)
            reader.start()
            while reader.is_alive() and not any(r.tokens > 2 for r in server.live()):
                qtbot.wait(1)
            if reader.is_alive():
                break
            reader.join()
        else:
            raise AssertionError("no API reply was seen streaming in 10 tries")
        with qtbot.waitSignal(controller.reply_finished, timeout=60_000) as finished:
            controller.send("and again from the window")
        reader.join(60)
        assert "data: [DONE]" in lines and finished.args[0].status in ("complete", "length")
        assert server.loaded() == [] and engine.host_pid == pid  # one engine process the whole time
    finally:
        window.close()
        window.server.control.wait_stopped(30)
        controller.shutdown()
