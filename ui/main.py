"""The one composition root of the window: builds the core, the engine client, the chat
controller and the main window, and runs the Qt event loop.

`cove` with no arguments lands here; any arguments go to the command line (app/cli), so the
console script can point at this module without app/ ever importing Qt.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Callable, Sequence

NO_DISPLAY = (
    "Cove's window needs a display, and none was found (DISPLAY and WAYLAND_DISPLAY are not set); "
    "`cove chat` chats in the terminal instead."
)


def has_display(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    if sys.platform in ("win32", "darwin"):
        return True
    if environ.get("QT_QPA_PLATFORM", "").split(":")[0] in {"offscreen", "minimal", "vnc", "eglfs", "linuxfb"}:
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        from app.cli.main import main as cli_main

        return cli_main(args)
    if not has_display():
        print(f"cove: {NO_DISPLAY}", file=sys.stderr)
        return 1
    return run_window()


def run_window(
    *,
    engine_argv: list[str] | None = None,
    quit_after_ms: int | None = None,
    on_started: "Callable[[object], None] | None" = None,
) -> int:
    """Run the window until it closes. `engine_argv` replaces the engine host command (tests
    use a scripted host); `on_started` is called with the shown MainWindow (test drivers)."""
    from PySide6.QtCore import QSocketNotifier, QTimer
    from PySide6.QtWidgets import QApplication

    from app.cli.main import describe_error
    from app.core import open_core
    from app.engine.client import EngineClient
    from ui.chat_controller import ChatController
    from ui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "cove"])
    app.setApplicationName("Cove")
    app.setApplicationDisplayName("Cove")
    app.setDesktopFileName("cove")
    try:
        core = open_core()
    except Exception as exc:  # noqa: BLE001 - one sentence, no traceback
        print(f"cove: {describe_error(exc)}", file=sys.stderr)
        return 1
    engine = EngineClient(host_argv=engine_argv) if engine_argv else EngineClient()
    controller = ChatController(core, engine)
    window = MainWindow(
        controller,
        state_file=core.paths.data_dir / "window.ini",
        presets_file=core.paths.data_dir / "presets.json",
    )

    # SIGTERM (logout, shutdown) and SIGINT close the window like the person would: the reply
    # in progress is kept as 'interrupted'. Python runs signal handlers only between bytecodes,
    # and Qt's loop sits in C, so the signal is delivered through a socket Qt watches.
    read_end, write_end = socket.socketpair()
    read_end.setblocking(False)
    write_end.setblocking(False)
    signal.set_wakeup_fd(write_end.fileno())
    notifier = QSocketNotifier(read_end.fileno(), QSocketNotifier.Type.Read)

    def _drain_wakeup() -> None:
        try:
            read_end.recv(64)
        except OSError:
            pass

    notifier.activated.connect(_drain_wakeup)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, window.close))

    if core.notice:
        window.show_notice(core.notice)
    elif core.repaired:
        window.show_notice(f"{core.repaired} reply that was cut off last time is kept, marked interrupted.")
    window.show()
    window.start()
    if on_started is not None:
        on_started(window)
    if quit_after_ms is not None:
        QTimer.singleShot(quit_after_ms, window.close)
    app.aboutToQuit.connect(window.close)
    code = app.exec()
    signal.set_wakeup_fd(-1)
    notifier.setEnabled(False)
    core.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
