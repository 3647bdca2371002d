"""Asks a server what it is and which models it has (app.remote.probe) off the UI thread, for
the Connections tab's Test, Add and Refresh models. Answers come back as a queued signal; an
answer older than the latest probe of the same connection (or of the Add dialog's Test) is dropped.

Thread invariant: the probe thread gets a frozen Connection and the key, read on the UI
thread before it starts; it never touches a widget or the history's connection.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.errors import describe_error
from app.remote.connections import Connection, ConnectionProblem
from app.remote.errors import RemoteProblem
from app.remote.server_kinds import KIND_NAMES
from models.network import NetworkGate, NetworkRefused
from ui.background import run_in_background

if TYPE_CHECKING:  # app.remote.probe brings the HTTP client: imported at the first probe, not at start-up
    from app.remote.probe import ServerInfo


@dataclass(frozen=True)
class ProbeReply:
    """One finished probe, handed from its thread to the UI thread."""

    ticket: int
    connection: Connection  # what was probed (a draft, for the Add dialog's Test)
    info: ServerInfo | None  # None on failure
    error: str  # one sentence on failure, else ""
    purpose: str  # "test", "add" or "refresh": what the person asked for


def probe_sentence(exc: BaseException) -> str:
    """The sentence for what a probe raised (the server's fault, offline, a bad URL)."""
    if isinstance(exc, (RemoteProblem, NetworkRefused, ConnectionProblem)):
        text = str(exc)
    else:
        text = describe_error(exc)
    return text[:1].upper() + text[1:] if text else "The server could not be reached."


class ProbeWorker(QObject):
    """`probe(connection, key, purpose)` returns a ticket; `probed(ProbeReply)` follows, unless
    a later probe of the same connection (or Test) superseded it, the connection was forgotten or
    the worker closed: such an answer is dropped, and `dropped` counts the answers dropped so far."""

    probed = Signal(object)  # ProbeReply
    busy_changed = Signal(str, bool)  # connection name, whether a probe of it runs

    def __init__(self, gate: NetworkGate, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.gate = gate
        self._ids = itertools.count(1)
        self._latest: dict[str, int] = {}
        self._closed = False
        self.dropped = 0  # answers dropped (superseded, forgotten or after close)

    def probe(self, connection: Connection, key: str | None, purpose: str) -> int:
        ticket = next(self._ids)
        self._latest[_slot(connection.name, purpose)] = ticket
        self.busy_changed.emit(connection.name, True)
        from app.remote.probe import probe

        gate = self.gate
        run_in_background(
            self,
            lambda: probe(connection, key, gate),
            on_done=lambda info: self._answered(ProbeReply(ticket, connection, info, "", purpose)),
            on_failed=lambda sentence: self._answered(ProbeReply(ticket, connection, None, sentence, purpose)),
            describe=probe_sentence,
            name="cove-remote-probe",
        )
        return ticket

    def busy(self, name: str) -> bool:
        """A stored connection's probe is running (Add's or Refresh's; not a Test)."""
        return _slot(name, "add") in self._latest

    def forget(self, name: str) -> None:
        """Drop the answer of a probe of `name` in flight (the connection was removed)."""
        if self._latest.pop(_slot(name, "refresh"), None) is not None:
            self.busy_changed.emit(name, False)

    def close(self) -> None:
        self._closed = True

    def _answered(self, reply: ProbeReply) -> None:
        name, slot = reply.connection.name, _slot(reply.connection.name, reply.purpose)
        if self._closed or self._latest.get(slot) != reply.ticket:
            self.dropped += 1
            return
        del self._latest[slot]
        self.busy_changed.emit(name, False)
        self.probed.emit(reply)


def _slot(name: str, purpose: str) -> str:
    """Probes that supersede each other: a stored connection's (Add, Refresh), or the Test of a draft."""
    return "test" if purpose == "test" else f"connection:{name.lower()}"


def server_words(kind: str | None, version: str | None = None) -> str:
    """'llama.cpp's llama-server b5400', 'Ollama 0.6.2', 'an OpenAI-compatible server'."""
    if not kind or kind not in KIND_NAMES:
        return "an OpenAI-compatible server"
    return f"{KIND_NAMES[kind]} {version}" if version else KIND_NAMES[kind]


def probe_summary(host: str, info: ServerInfo) -> str:
    """What the server said about itself, in one sentence: 'gpu-box.lan:8000 answered: vLLM
    0.8.5 with 1 model (meta-llama/Llama-3.1-70B-Instruct).'"""
    ids = [str(m["id"]) for m in info.models if isinstance(m, dict) and m.get("id")]
    shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    count = f"{len(ids)} model{'s' if len(ids) != 1 else ''}"
    return f"{host} answered: {server_words(info.kind, info.version)} with {count}" + (f" ({shown})." if ids else ".")
