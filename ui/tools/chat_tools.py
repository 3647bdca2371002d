"""The tools of the window's conversations: which of the person's tool servers are on for a
conversation (kept in its params as "tool_servers", so the choice survives a restart), the
offline question, and the deferred tool loop a turn gets (app/turn/tools.py).

Threads: the store and the conversation are read on the UI thread when a turn begins; the loop
is built on the turn's own thread (listing the tools starts the servers, which may take
seconds), handed only the frozen servers and the window's McpHost. The rules store inside the
loop is used on the UI thread only (the Turn decides on the thread that polls it). A server's
failure sentence goes into the notes with its control, bidirectional and invisible characters
shown (app/visible_text.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from app.errors import describe_error
from app.mcp.approval import DENY, ToolRequest
from app.mcp.failures import ToolServerError
from app.mcp.host import McpHost
from app.mcp.store import ToolServerStore
from app.store.history import Conversation
from app.turn.tools import ToolLoop, offer
from app.visible_text import in_window
from models.network import NetworkGate
from ui.tools.add_dialog import capital

PARAMS_KEY = "tool_servers"
Confirm = Callable[[str, str], bool]  # (title, question) -> yes?


def enabled_servers(conversation: Conversation | None) -> list[str]:
    """The names of the tool servers on for this conversation (none for a new one)."""
    if conversation is None or not isinstance(conversation.params, dict):
        return []
    names = conversation.params.get(PARAMS_KEY)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _not_asked(_request: ToolRequest) -> str:
    return DENY  # a deferred loop asks through the window's dialog, never through this


class ChatTools:
    """`loop_for(conversation)` on the UI thread when a turn begins: None (no tools), or how to
    build the turn's loop on its thread. Sentences for the person (a server that did not start)
    collect in `notes`; the turn's runner shows them."""

    def __init__(self, store: ToolServerStore, gate: NetworkGate, host: Callable[[], McpHost], confirm: Confirm) -> None:
        self.store = store
        self.gate = gate
        self._host = host  # the window's McpHost, made on first use
        self._confirm = confirm
        self.notes: deque[str] = deque()  # appended by a turn's thread, taken on the UI thread
        self.first_choice = "auto"  # the first reply's tool_choice ("required" forces a call)

    def loop_for(self, conversation: Conversation | None) -> Callable[[], ToolLoop | None] | None:
        names = enabled_servers(conversation)
        servers = [server for server in (self.store.find(name) for name in names) if server is not None]
        if not servers:
            return None
        listed_names = ", ".join(s.name for s in servers)
        if self.gate.offline:
            question = (
                f"Cove is offline ({self.gate.offline_reason}). Start the tool servers of this conversation "
                f"({listed_names}) for this one reply?\n\n"
                + "\n".join(s.identity for s in servers)
                + "\n\nCove cannot see what a tool server does on the network."
            )
            if not self._confirm("Start tool servers while offline?", question):
                self.notes.append(f"Cove is offline, so the tool servers {listed_names} were not started; this reply has no tools.")
                return None
        try:
            host = self._host()
        except OSError as exc:  # e.g. its log file cannot be opened: one sentence, the reply goes on
            self.notes.append(f"The tool servers {listed_names} were not started: {describe_error(exc)}. This reply has no tools.")
            return None
        store, notes, choice = self.store, self.notes, self.first_choice

        def build() -> ToolLoop | None:  # on the turn's thread: starts the servers, lists their tools
            listed: list[tuple[Any, Any]] = []
            for server in servers:
                try:
                    listed.append((server, host.list_tools(server)))
                except ToolServerError as exc:
                    notes.append(f"{capital(in_window(str(exc)))} Its tools are not offered in this reply.")
            offered = offer(listed)
            notes.extend(in_window(sentence) for sentence in offered.refused)
            if not offered.tools:
                return None
            return ToolLoop(host, offered.tools, _not_asked, store, first_choice=choice, deferred=True)

        return build
