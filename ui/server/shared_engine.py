"""The Server switch's servers share the window's engine: each new server adopts it, and the
window's turns borrow it through the newest server's gate while that server runs. A server for
other machines too listens on every address with HTTPS (app/serve/http/runner.py)."""

from __future__ import annotations

from app.core import Core
from app.serve.http.runner import ALL_ADDRESSES, ServerThread
from ui.chat.controller import ChatController
from ui.server.control import ServerFactory


def sharing_server_factory(core: Core, controller: ChatController) -> ServerFactory:
    """A factory of servers on a port (for other machines too: `others`), each sharing
    `controller`'s engine; provides the controller's gate."""
    servers: list[ServerThread] = []

    def make_server(port: int, others: bool = False) -> ServerThread:
        host = ALL_ADDRESSES if others else "127.0.0.1"
        servers.append(
            ServerThread(
                core.paths,
                host=host,
                port=port,
                tls=others,
                window_engine=controller.engine,
                window_first=lambda: core.settings.window_first,
            )
        )
        return servers[-1]

    controller.provide_engine_gate(lambda: servers[-1].gate() if servers else None)
    return make_server
