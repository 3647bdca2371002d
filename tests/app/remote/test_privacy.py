"""Which hosts are private (this machine, the person's network), and the one question asked
before messages go anywhere else."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.request import ReplyRequest, Sampling
from app.remote.engine import RemoteEngine
from app.remote.privacy import ConsentNeeded, is_private_host, private_without_lookup, strip_port
from models.network import NetworkGate, NetworkRefused
from tests.app.remote.conftest import connection_to, model_on


def resolver(table: dict[str, list[str]]):
    def resolve(name: str) -> list[str]:
        return table.get(name, [])

    return resolve


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8000",
        "localhost",
        "LOCALHOST:11434",
        "[::1]:8080",
        "10.1.2.3",
        "172.16.0.9:8000",
        "172.31.255.255",
        "192.168.1.20:8000",
        "169.254.3.4",
        "[fd12:3456::1]:8000",
        "[fe80::1%eth0]:80",
        "gpu-box.local:8000",
        "box.localhost",
        "[::ffff:192.168.0.5]",
    ],
)
def test_private_hosts(host: str) -> None:
    assert is_private_host(host, resolver({})) is True


@pytest.mark.parametrize(
    "host", ["8.8.8.8", "172.32.0.1:8000", "11.0.0.1", "[2001:db8::1]:443", "100.64.0.1", "[::ffff:8.8.8.8]", "", "api.example.com"]
)
def test_public_hosts(host: str) -> None:
    assert is_private_host(host, resolver({"api.example.com": ["93.184.216.34"]})) is False


def test_a_name_is_private_only_when_every_address_it_resolves_to_is() -> None:
    table = {"gpu-box.lan": ["192.168.1.20", "fd00::20"], "mixed.lan": ["192.168.1.20", "93.184.216.34"]}
    assert is_private_host("gpu-box.lan:8000", resolver(table)) is True
    assert is_private_host("mixed.lan:8000", resolver(table)) is False
    assert is_private_host("unknown.lan", resolver(table)) is False  # does not resolve: not private
    assert private_without_lookup("gpu-box.lan") is None  # only a lookup can tell
    assert strip_port("[::1]:8000") == "::1" and strip_port("host:1") == "host" and strip_port("fe80::1") == "fe80::1"


def test_a_public_host_needs_consent_once_and_offline_refuses_before_any_socket() -> None:
    connection = connection_to("http://8.8.8.8:8000/v1", name="cloud")
    gate = NetworkGate(environ={})
    engine = RemoteEngine(connection, None, gate)
    with pytest.raises(ConsentNeeded) as asked:
        engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model_on(connection))
    assert asked.value.host == "8.8.8.8:8000" and asked.value.connection == "cloud"
    assert str(asked.value).startswith("Your messages will be sent to 8.8.8.8:8000")
    # Agreed once: no question now; offline mode then refuses (so no request is made here)
    agreed = RemoteEngine(replace(connection, public_ok=True), None, NetworkGate(offline=True))
    with pytest.raises(NetworkRefused) as refused:
        agreed.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model_on(connection))
    assert "chatting on your server" in str(refused.value) and "use your server" in str(refused.value)


def test_a_name_is_judged_by_what_it_resolves_to_now_not_by_an_earlier_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.remote.privacy as privacy

    # Probed at home, where the name was private; on another network it resolves to a public address.
    moved = connection_to("http://near.example:8000/v1", server={"kind": "vllm", "private": True})
    monkeypatch.setattr(privacy, "resolve", resolver({"near.example": ["203.0.113.9"]}))
    with pytest.raises(ConsentNeeded):
        RemoteEngine(moved, None, NetworkGate(environ={})).check()
    monkeypatch.setattr(privacy, "resolve", resolver({"near.example": ["192.168.1.20"]}))
    with pytest.raises(NetworkRefused):
        RemoteEngine(moved, None, NetworkGate(offline=True)).check()  # no consent asked: it is private now
