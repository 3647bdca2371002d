"""Screenshots of the real window for the README: the first-run welcome page, a short
conversation with the starter model, then the chat, the performance panel, the model picker,
search results, the Models panel, the Server panel answering a streamed request, and a
connection to a server of one's own (another Cove's `cove serve`, started here in a home of its
own on the starter model): the Add dialog after Test, the Connections tab, a conversation with
its reply, and the picker listing the server's model, as PNGs.

Run under Xvfb for real window decorations and popups, or offscreen:
    xvfb-run -s "-screen 0 1400x900x24" .venv/bin/python -m tools.screenshots assets/screenshots
    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tools.screenshots assets/screenshots
It uses a fresh temporary COVE_HOME, so it never touches your own history.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

PROMPTS = (
    "Write a short poem about a lighthouse by the sea.",
    "Now give me three facts about lighthouses as a list.",
)
REMOTE_PROMPT = "Describe a harbour at dawn in three sentences."
SHOTS = 11


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "assets/screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="cove-shots-"))
    os.environ["COVE_HOME"] = str(home)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.core import open_core
    from app.engine.client import EngineClient
    from app.serve.http.runner import ServerThread
    from app.settings import SamplingParams
    from models.starter import ensure_starter
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    app = QApplication.instance() or QApplication(["cove"])
    app.setApplicationDisplayName("Cove")
    core = open_core()
    starter = ensure_starter(core.library)
    core.remember_model(starter)
    core.save_sampling_defaults(SamplingParams(temperature=0.7, repeat_penalty=1.15, max_tokens=120, seed=42))
    controller = ChatController(core, EngineClient())
    window = MainWindow(
        controller,
        state_file=home / "window.ini",
        presets_file=home / "presets.json",
        server_factory=lambda port: ServerThread(core.paths, port=port),
    )
    window.resize(1320, 820)
    window.show()
    window.start()
    pending = list(PROMPTS)
    shots: list[str] = []

    def save(widget, name: str) -> None:
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        shots.append(str(path))

    def next_prompt(_message=None) -> None:
        if pending:
            text = pending.pop(0)
            window.composer.set_text(text)
            QTimer.singleShot(400, lambda: window._send(text))
        else:
            controller.reply_finished.disconnect(next_prompt)
            QTimer.singleShot(800, finish)

    def finish() -> None:
        save(window, "chat")
        save(window.perf, "performance")
        window.picker.combo.showPopup()
        QTimer.singleShot(500, picker_shot)

    def picker_shot() -> None:
        popup = window.picker.combo.view().window()
        save(popup, "model-picker")
        window.picker.combo.hidePopup()
        window.sidebar.focus_search()
        window.sidebar.search_box.setText("lighthouse")
        QTimer.singleShot(1200, search_shot)

    def search_shot() -> None:
        save(window, "search")
        panel = window.open_models("Discover")
        panel.resize(1100, 720)
        QTimer.singleShot(1000, lambda: models_shot(panel))

    def models_shot(panel) -> None:
        save(panel, "models")
        panel.close()
        server_start()

    def server_start() -> None:
        window.server.port = free_port()
        panel = window.server.open()
        panel.resize(1000, 640)
        panel.keys._ask_name = lambda: "editor"
        panel.keys.new_key()  # shown once, in the shot
        window.server.control.turn_on(panel.port.value())
        when(lambda: window.server.control.state != "starting", lambda: server_request(panel))

    def server_request(panel) -> None:
        key = panel.keys.key_field.text()
        threading.Thread(target=stream_reply, args=(window.server.control.address, key, starter.name), daemon=True).start()
        when(lambda: any(r[3] == "running" and int(r[4]) >= 40 for r in panel.request_rows()), lambda: server_shot(panel))

    def server_shot(panel) -> None:
        save(panel, "server")
        window.server.control.turn_off()
        when(lambda: window.server.control.state == "off", lambda: (panel.close(), remote_start()))

    def remote_start() -> None:
        served.append(OwnServer(starter.path, home / "own-server"))
        when(lambda: served[0].ready(), remote_add, tries=1200)

    def remote_add() -> None:
        panel = window.open_models("Connections")
        panel.resize(1000, 640)
        dialog = panel.connections_page.open_add_dialog()
        dialog.fill("gpu-box", served[0].url)
        dialog.test()
        when(lambda: not dialog.testing(), lambda: QTimer.singleShot(300, lambda: remote_added(panel, dialog)))

    def remote_added(panel, dialog) -> None:
        save(dialog, "connection-add")
        dialog.add_button.click()
        page = panel.connections_page
        when(lambda: page.model_names("gpu-box"), lambda: QTimer.singleShot(300, lambda: connections_shot(panel)))

    def connections_shot(panel) -> None:
        panel.connections_page.select("gpu-box", starter.name)
        save(panel, "connections")
        panel.close()
        window.sidebar.search_box.clear()
        window.new_chat()
        window._choose_model(f"{starter.name}@gpu-box")
        controller.reply_finished.connect(remote_replied)
        window.composer.set_text(REMOTE_PROMPT)
        QTimer.singleShot(400, lambda: window._send(REMOTE_PROMPT))

    def remote_replied(_message) -> None:
        controller.reply_finished.disconnect(remote_replied)
        QTimer.singleShot(800, remote_chat_shot)

    def remote_chat_shot() -> None:
        save(window, "remote-chat")
        window.picker.combo.showPopup()
        QTimer.singleShot(500, remote_picker_shot)

    def remote_picker_shot() -> None:
        save(window.picker.combo.view().window(), "model-picker-remote")
        window.picker.combo.hidePopup()
        window.close()
        app.quit()

    def when(ready, then, tries: int = 600) -> None:  # poll every 100 ms for up to a minute
        if ready() or tries <= 0:
            then()
        else:
            QTimer.singleShot(100, lambda: when(ready, then, tries - 1))

    def welcome_shot() -> None:
        save(window, "welcome")
        next_prompt()

    served: list[OwnServer] = []
    controller.reply_finished.connect(next_prompt)
    QTimer.singleShot(1500, welcome_shot)
    QTimer.singleShot(600_000, app.quit)  # never hang a build
    try:
        app.exec()
    finally:
        for server in served:
            server.stop()
    core.close()
    for path in shots:
        print(path)
    return 0 if len(shots) == SHOTS else 1


class OwnServer:
    """Another Cove (`cove serve`) in a home of its own with the starter model, on a free loopback
    port: the "server of one's own" the connection shots talk to."""

    def __init__(self, model: str, home: Path) -> None:
        import subprocess

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "COVE_HOME": str(home)}
        cove = [sys.executable, "-m", "app.cli.main"]
        subprocess.run([*cove, "models", "import", model], env=env, check=True, capture_output=True, timeout=120)
        with (home / "serve.log").open("wb") as out:
            self._proc = subprocess.Popen(
                [*cove, "serve", "--port", str(self.port)], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def ready(self) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.url}/models", timeout=1).status_code == 200
        except httpx.HTTPError:
            return self._proc.poll() is not None  # it exited: give up waiting (the shots say what is missing)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a server that will not stop is killed
            self._proc.kill()


def free_port() -> int:
    """cove serve's default port when it is free (the shot shows what a person sees), else any."""
    from app.cli.serve_cmd import DEFAULT_PORT

    for port in (DEFAULT_PORT, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port")


def stream_reply(address: str, key: str, model: str) -> None:
    """An editor's streamed request to the window's server, read to its end."""
    import httpx

    body = {
        "model": model,
        "stream": True,
        "max_tokens": 160,
        "messages": [{"role": "user", "content": "Explain what a lighthouse keeper did, in a paragraph."}],
    }
    try:
        with httpx.stream(
            "POST", f"{address}/chat/completions", json=body, timeout=120, headers={"Authorization": f"Bearer {key}"}
        ) as reply:
            for _line in reply.iter_lines():
                pass
    except httpx.HTTPError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
