"""Pairing two Coves on this machine, each with its own home, over real TLS: `cove serve pair` in
home A makes a code while `cove serve --host 127.0.0.2` runs there, `cove remote pair` in home B
checks the certificate against the code, gets a key of its own into its keyring, pins the
certificate, and lists A's tiny model through it. A code works once and for 10 minutes; a typo is
told before anything is sent; a machine in the middle with another certificate receives nothing;
wrong secrets are slowed to 5 a minute; removing the connection deletes its pinned certificate."""

from __future__ import annotations

import json
import re
import sqlite3
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.pairing.code import ALPHABET, new_code
from tests.support.pairing_homes import HOST, Home, Server, serving
from tests.support.pairing_homes import desk_home as make_desk_home
from tests.support.recording_tls import RecordingTls
from tests.support.serve_fixture import free_port


def one_sentence(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("cove: "), done.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def desk_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return make_desk_home(tmp_path_factory.mktemp("desk"))


@pytest.fixture(scope="module")
def desk(desk_home: Home) -> Iterator[Server]:
    yield from serving(desk_home)


def _der(pem_file: Path) -> bytes:
    return x509.load_pem_x509_certificate(pem_file.read_bytes()).public_bytes(serialization.Encoding.DER)


def test_pairing_pins_the_certificate_stores_a_key_and_lists_the_model(desk: Server, tmp_path: Path) -> None:
    laptop = Home(tmp_path)
    code = desk.code()
    paired = laptop.cove("remote", "pair", "desk", desk.url, code)
    assert paired.returncode == 0, paired.stderr
    assert f"Paired with {HOST}:{desk.port} as desk" in paired.stdout and "tiny@desk" in paired.stdout
    pinned = laptop.paths.data_dir / "paired" / "desk.pem"
    assert _der(pinned) == _der(desk.home.paths.tls_dir / "cert.pem")
    assert pinned.stat().st_mode & 0o077 == 0
    # The key is in the keyring only, never shown; the desk knows it by the laptop's name.
    stored = json.loads((tmp_path / "keyring.json").read_text())
    key = stored["cove/remote:desk"]
    assert key.startswith("cove-") and key not in paired.stdout + paired.stderr
    assert re.search(r"^paired-\S+$", desk.home.cove("serve", "keys", "list").stdout, re.M)
    assert "paired a machine" in desk.log.read_text()
    # Later requests go through the pinned certificate, with the key.
    listed = laptop.cove("remote", "models", "desk")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["tiny@desk"]
    shown = json.loads(laptop.cove("remote", "list", "--json").stdout)
    assert shown[0]["ca_file"] == str(pinned.resolve()) and shown[0]["key"] is True
    # The same code again, from another machine: refused, nothing added there.
    other = Home(tmp_path / "other")
    assert "was used already" in one_sentence(other.cove("remote", "pair", "desk", desk.url, code))
    assert not (other.paths.data_dir / "paired" / "desk.pem").exists()
    # Removing the connection deletes its key and its pinned certificate.
    removed = laptop.cove("remote", "remove", "desk")
    assert removed.returncode == 0 and "and its pinned certificate" in removed.stdout
    assert not pinned.exists() and "cove/remote:desk" not in json.loads((tmp_path / "keyring.json").read_text())


def test_an_expired_code_is_refused(desk: Server, tmp_path: Path) -> None:
    code = desk.code()
    with sqlite3.connect(desk.home.paths.database) as conn:
        conn.execute("UPDATE pairing_codes SET expires_at = '2000-01-01T00:00:00.000Z' WHERE used_at IS NULL")
    refused = one_sentence(Home(tmp_path).cove("remote", "pair", "desk", desk.url, code))
    assert "has expired" in refused and "cove serve pair" in refused


def test_a_typo_is_told_here_before_anything_is_sent(desk: Server, tmp_path: Path) -> None:
    code = desk.code()
    plain = code.replace("-", "")
    wrong = ALPHABET[(ALPHABET.index(plain[20]) + 1) % 32]
    typo = plain[:20] + wrong + plain[21:]
    # An address where nothing listens: the code is refused before any connection is tried.
    nowhere = f"https://{HOST}:{free_port()}"
    assert "has a typo" in one_sentence(Home(tmp_path).cove("remote", "pair", "desk", nowhere, typo))
    i = next(i for i in range(len(plain) - 1) if plain[i] != plain[i + 1])
    swapped = plain[:i] + plain[i + 1] + plain[i] + plain[i + 2 :]
    assert "has a typo" in one_sentence(Home(tmp_path).cove("remote", "pair", "desk", nowhere, swapped))
    # The code itself is still good; left out of the command line, it is read from standard input.
    assert Home(tmp_path).cove("remote", "pair", "desk", desk.url, stdin=code + "\n").returncode == 0


def test_a_machine_in_the_middle_with_another_certificate_receives_nothing(desk: Server, tmp_path: Path) -> None:
    code = desk.code()
    impostor = RecordingTls(tmp_path / "impostor-tls", HOST)  # same names, another key
    try:
        laptop = Home(tmp_path / "laptop")
        refused = one_sentence(laptop.cove("remote", "pair", "desk", f"https://{HOST}:{impostor.port}", code))
        impostor.thread.join(15)
    finally:
        impostor.close()
    assert f"the machine at {HOST} presented another certificate than the code names; nothing was sent" in refused
    assert impostor.handshakes == 1 and impostor.received == b""
    assert not (laptop.paths.data_dir / "paired").exists() or not any((laptop.paths.data_dir / "paired").iterdir())
    assert "desk" not in laptop.cove("remote", "list").stdout
    # The code was not spent: the real machine still takes it.
    assert laptop.cove("remote", "pair", "desk", desk.url, code).returncode == 0


def test_wrong_secrets_are_slowed_to_five_a_minute(desk_home: Home) -> None:
    for server in serving(desk_home):  # a server of its own, so the other tests' tries do not count
        trusting = ssl.create_default_context(cafile=str(desk_home.paths.tls_dir / "cert.pem"))
        with httpx.Client(verify=trusting, timeout=30) as client:
            for _ in range(5):
                wrong = client.post(f"{server.url}/cove/pair", json={"secret": new_code(b"x").secret, "name": "guess"})
                assert wrong.status_code == 401, wrong.text
            slowed = client.post(f"{server.url}/cove/pair", json={"secret": new_code(b"x").secret, "name": "guess"})
        assert slowed.status_code == 429 and int(slowed.headers["retry-after"]) > 0
        assert "too many wrong pairing codes were tried in the last minute" in slowed.json()["error"]["message"]
