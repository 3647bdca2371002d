"""The laptop's side of pairing in this process (app/remote/pairing.py), against a real TLS
server on a thread: an address the certificate does not name, a certificate other than the
code's, a plain http:// address and a name already taken are each refused with a sentence, and
in every case the server receives no byte after the handshake and nothing is saved."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.pairing.code import new_code
from app.remote.connections import ConnectionProblem, Connections
from app.remote.keys import ConnectionKeys
from app.remote.pairing import PairingRefused, pair
from app.store.database import open_database
from models.network import NetworkGate
from tests.support.keyrings import InMemoryKeyring
from tests.support.recording_tls import RecordingTls


@pytest.fixture
def connections(tmp_path: Path) -> Iterator[Connections]:
    db = open_database(tmp_path / "data" / "cove.db").db
    yield Connections(db, ConnectionKeys(InMemoryKeyring()))
    db.close()


def test_an_address_the_certificate_does_not_name_is_refused_before_sending(connections: Connections, tmp_path: Path) -> None:
    server = RecordingTls(tmp_path / "tls", "127.0.0.3", named="127.0.0.2")
    try:
        with pytest.raises(PairingRefused) as refused:
            pair(connections, NetworkGate(), "desk", f"https://127.0.0.3:{server.port}", str(new_code(server.der)), "laptop")
        server.thread.join(15)
    finally:
        server.close()
    assert "does not name 127.0.0.3" in str(refused.value) and "127.0.0.2" in str(refused.value)
    assert "Nothing was sent" in str(refused.value) and server.received == b""
    assert connections.list() == [] and not any((connections.pinned_dir or tmp_path).glob("*.pem"))


def test_another_certificate_than_the_codes_is_refused_before_sending(connections: Connections, tmp_path: Path) -> None:
    server = RecordingTls(tmp_path / "tls", "127.0.0.2", named="127.0.0.2")
    try:
        with pytest.raises(PairingRefused, match="presented another certificate than the code names; nothing was sent"):
            pair(connections, NetworkGate(), "desk", f"https://127.0.0.2:{server.port}", str(new_code(b"another")), "laptop")
        server.thread.join(15)
    finally:
        server.close()
    assert server.received == b"" and connections.list() == []


def test_plain_http_a_taken_name_and_offline_are_refused_without_connecting(connections: Connections) -> None:
    code = str(new_code(b"cert"))
    with pytest.raises(PairingRefused, match="needs the other Cove's https:// address"):
        pair(connections, NetworkGate(), "desk", "http://127.0.0.2:1", code)
    connections.add("desk", "http://127.0.0.1:1")
    with pytest.raises(ConnectionProblem, match="A connection named desk already exists"):
        pair(connections, NetworkGate(), "DESK", "https://127.0.0.2:1", code)
    with pytest.raises(RuntimeError, match="offline"):
        pair(connections, NetworkGate(offline=True), "other", "https://127.0.0.2:1", code)
    with pytest.raises(PairingRefused, match="refused the connection"):
        pair(connections, NetworkGate(), "other", f"https://127.0.0.2:{_closed_port()}", code)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return s.getsockname()[1]
