"""The Server switch's servers share the window's engine: each new server adopts it, and the
window's turns borrow it through the newest server's gate while that server runs."""

from __future__ import annotations

from collections.abc import Callable

from app.core import Core
from app.serve.http.runner import ServerThread
from ui.chat.controller import ChatController


def sharing_server_factory(core: Core, controller: ChatController) -> Callable[[int], ServerThread]:
    """A factory of servers on a port, each sharing `controller`'s engine; provides the controller's gate."""
    servers: list[ServerThread] = []

    def make_server(port: int) -> ServerThread:
        servers.append(
            ServerThread(core.paths, port=port, window_engine=controller.engine, window_first=lambda: core.settings.window_first)
        )
        return servers[-1]

    controller.provide_engine_gate(lambda: servers[-1].gate() if servers else None)
    return make_server
