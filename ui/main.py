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
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from app.private_files import keep_private
from ui.shell import system_libraries  # Qt-free: it runs before Qt is imported

if TYPE_CHECKING:
    from app.core import Core

NO_DISPLAY = (
    "Cove's window needs a display, and none was found (DISPLAY and WAYLAND_DISPLAY are not set); "
    "`cove chat` chats in the terminal instead."
)
SERVER_STOP_WAIT_S = 20.0  # at quit, for the Server switch's server to cancel its replies and stop its engines


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
    missing = system_libraries.window_library_problem(os.environ)  # before Qt, which would abort without them
    if missing:
        print(f"cove: {missing}", file=sys.stderr)
        return 1
    # Hooks for the packaging checks and start-up measurements (packaging/README.md):
    # COVE_QUIT_AFTER_MS=N closes the window N ms after it is shown; COVE_REPORT_STARTUP=1
    # prints on stderr how long after the process started the window first painted.
    keep_private()  # what this run creates is the person's alone (app/private_files.py)
    quit_after = os.environ.get("COVE_QUIT_AFTER_MS", "").strip()
    return run_window(
        quit_after_ms=int(quit_after) if quit_after.isdigit() else None,
        on_started=_report_first_paint if os.environ.get("COVE_REPORT_STARTUP") else None,
    )


def process_age_s() -> float:
    """Seconds since this process started (exec), from the kernel's own record where it has one."""
    try:  # Linux: start time in clock ticks since boot, against the same (boot-time) clock
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, IndexError, ValueError):
        import psutil

        return time.time() - psutil.Process().create_time()


def _report_first_paint(window: object) -> None:
    """Print, once, the time from process start to the first paint of the window's widgets."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication, QWidget

    found = QApplication.instance()
    if found is None:  # no application: nothing will paint
        return
    app = found

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
            if event.type() == QEvent.Type.Paint and isinstance(watched, QWidget) and watched.window() is window:
                app.removeEventFilter(self)
                print(f"cove: window shown {process_age_s() * 1000:.0f} ms after the process started", file=sys.stderr, flush=True)
            return False

    app.installEventFilter(FirstPaint(app))


def tidy_downloads(core: Core) -> None:
    """At start-up, before any download of this run: delete what interrupted downloads left
    that cannot be resumed (resumable ones stay; the Models panel offers them)."""
    from app.downloads import cleanup_orphans

    try:
        cleanup_orphans(core.paths, (core.models_dir,))
    except OSError:
        pass  # tidying is best effort; it runs again next start


def run_window(
    *,
    engine_argv: list[str] | None = None,
    quit_after_ms: int | None = None,
    on_started: Callable[[object], None] | None = None,
) -> int:
    """Run the window until it closes. `engine_argv` replaces the engine host command (tests
    use a scripted host); `on_started` is called with the shown MainWindow (test drivers)."""
    from PySide6.QtCore import QSocketNotifier, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.core import open_core
    from app.errors import describe_error
    from app.log_redact import install_redaction
    from app.termination import TERMINATING_SIGNALS
    from ui.chat.controller import ChatController
    from ui.shell.main_window import MainWindow

    # instance() is typed as the QCoreApplication base; in this process it is only ever a QApplication.
    app = cast(QApplication, QApplication.instance()) or QApplication([sys.argv[0] if sys.argv else "cove"])
    app.setApplicationName("Cove")
    app.setApplicationDisplayName("Cove")
    from ui.shell.app_icon import app_icon

    app.setWindowIcon(app_icon())
    app.setDesktopFileName("cove")
    try:
        core = open_core()
    except Exception as exc:  # noqa: BLE001 - one sentence, no traceback
        sentence = describe_error(exc)
        print(f"cove: {sentence}", file=sys.stderr)
        # Started from the applications menu, nobody sees stderr: the window that cannot open says why.
        QMessageBox.critical(None, "Cove could not start", sentence[:1].upper() + sentence[1:])
        return 1
    tidy_downloads(core)
    install_redaction()  # the window makes Hub calls too: no token or Authorization header in any log line
    engine = core.engine_client(host_argv=engine_argv)  # saves conversations' KV state in the cache folder
    controller = ChatController(core, engine)

    from ui.server.shared_engine import sharing_server_factory

    make_server = sharing_server_factory(core, controller)  # the Server switch's servers share the window's engine

    window = MainWindow(
        controller,
        state_file=core.paths.data_dir / "window.ini",
        presets_file=core.paths.data_dir / "presets.json",
        server_factory=make_server,
    )
    from ui.connections.consent import ask_consent

    # Before messages first go to a server outside the private network, the window asks (once per connection).
    controller.provide_consent(lambda connection, host: ask_consent(window, connection, host))

    # SIGTERM (logout, shutdown), SIGHUP (the terminal it was started from closed) and SIGINT
    # close the window like the person would: the reply
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
    for sig in (*TERMINATING_SIGNALS, signal.SIGINT):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, window.close))

    for notice in core.startup_notices:  # kept until dismissed: start-up's passing notes must not clear them
        window.keep_notice(notice.text, notice.folder)
    window.show()
    window.start()
    if on_started is not None:
        on_started(window)
    if quit_after_ms is not None:
        QTimer.singleShot(quit_after_ms, window.close)
    app.aboutToQuit.connect(window.close)
    code = app.exec()
    if window.server is not None:
        window.server.wait_stopped(SERVER_STOP_WAIT_S)  # the window is gone; its engines stop before the store closes
    signal.set_wakeup_fd(-1)
    notifier.setEnabled(False)
    core.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
