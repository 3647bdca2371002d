"""Off loopback before any API key exists (app/serve/http/peer_owner.py without_keys): the
person's own programs get in as on loopback, another machine may only pair, and pairing needs no
key made first: `cove serve --host 127.0.0.2` starts with a sentence saying so, and another Cove
pairs with it and then lists its model with the key pairing gave it."""

from __future__ import annotations

from pathlib import Path

from app.serve.http.peer_owner import without_keys
from tests.support.pairing_homes import Home, serving
from tests.support.tiny_model import write_tiny_gguf


def test_another_machine_is_refused_and_told_to_pair() -> None:
    # 192.0.2.0/24 is for documentation: no socket of this machine has that address, so its owner is unknown.
    refused = without_keys(("192.0.2.7", 40000), ("192.0.2.1", 8642))
    assert refused is not None and refused.status == 401
    assert "pair this one" in str(refused.message) and "cove serve keys add" in str(refused.message)


def test_a_loopback_peer_whose_owner_is_unknown_gets_in_as_before() -> None:
    assert without_keys(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert without_keys(("::1", 1), ("::1", 2)) is None


def test_with_no_key_yet_the_server_starts_and_another_cove_pairs(tmp_path: Path) -> None:
    desk = Home(tmp_path / "desk")
    desk.root.mkdir()
    tiny = write_tiny_gguf(desk.root / "tiny.gguf")
    assert desk.cove("models", "import", str(tiny)).returncode == 0
    servers = serving(desk)
    server = next(servers)
    try:
        assert "No API key yet: other machines can only pair" in server.log.read_text()
        laptop = Home(tmp_path / "laptop")
        paired = laptop.cove("remote", "pair", "desk", server.url, server.code())
        assert paired.returncode == 0, paired.stderr
        assert "tiny@desk" in paired.stdout
        assert "paired-" in desk.cove("serve", "keys", "list").stdout
    finally:
        servers.close()
