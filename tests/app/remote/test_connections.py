"""Connections kept in the history file (opened with the app's own database code), their keys
in the keyring (or this run's memory when there is no secure keyring), names and addresses
checked with sentences, and remote models named MODEL_ID@CONNECTION."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.core import open_core
from app.keyring_policy import NoBackend
from app.paths import resolve_paths
from app.remote.connections import ConnectionProblem, Connections, normalise_url
from app.remote.keys import ConnectionKeys
from app.remote.probe import ServerInfo
from app.remote.remote_model import RemoteModel, remote_models, split_remote_name
from app.store.database import open_database
from app.store.migrations import MIGRATIONS
from tests.app.remote.conftest import SERVER_KEY
from tests.support.keyrings import InMemoryKeyring, LockedKeyring, RefusingKeyring, files_containing

VLLM = ServerInfo(
    "vllm",
    "0.6.3",
    [
        {"id": "meta-llama/Llama-3.1-70B", "fingerprint": None, "context_length": 8192},
        {"id": "small", "fingerprint": "sha256:abc", "context_length": None},
    ],
    True,
)


def test_connections_round_trip_through_the_history_file(tmp_path: Path) -> None:
    env = {"COVE_HOME": str(tmp_path / "home")}
    keyring = InMemoryKeyring()
    core = open_core(resolve_paths(env))
    connections = Connections(core.db, ConnectionKeys(keyring))
    added = connections.add("gpu-box", "http://GPU-Box.lan:8000/", key=f"  {SERVER_KEY}\n")
    assert added.base_url == "http://gpu-box.lan:8000/v1" and added.host == "gpu-box.lan:8000"
    assert added.public_ok is False and added.server == {} and added.created_at
    assert connections.last_notice is None  # the key is in a secure keyring
    assert keyring.passwords == {("cove", "remote:gpu-box"): SERVER_KEY}
    connections.record_probe("gpu-box", VLLM)
    connections.add("other", "https://[fd00::5]:8443/api/v1/chat/completions")
    connections.confirm_public("other")
    core.close()

    core = open_core(resolve_paths(env))
    connections = Connections(core.db, ConnectionKeys(keyring))
    box, other = connections.list()
    assert box.name == "gpu-box" and box.server["kind"] == "vllm" and box.server["version"] == "0.6.3"
    assert box.server["private"] is True and box.server["probed_at"]
    assert [m.name for m in remote_models(box)] == ["meta-llama/Llama-3.1-70B@gpu-box", "small@gpu-box"]
    assert remote_models(box)[0] == RemoteModel("gpu-box", "meta-llama/Llama-3.1-70B", "gpu-box.lan:8000", "vllm", None, 8192)
    assert remote_models(box)[1].fingerprint == "sha256:abc"
    assert other.base_url == "https://[fd00::5]:8443/api/v1" and other.host == "[fd00::5]:8443" and other.public_ok
    assert connections.get("GPU-BOX") == box  # names are found whatever their letter case
    assert connections.key("gpu-box") == SERVER_KEY and connections.key("other") is None
    connections.remove("gpu-box")
    assert keyring.passwords == {} and [c.name for c in connections.list()] == ["other"]
    with pytest.raises(ConnectionProblem) as gone:
        connections.get("gpu-box")
    assert str(gone.value) == "There is no connection named gpu-box (there are: other)."
    core.close()
    assert files_containing(tmp_path / "home", SERVER_KEY) == []


def test_the_migration_makes_the_table_and_the_record_s_column(tmp_path: Path) -> None:
    assert "0010_connections" in [name for name, _ in MIGRATIONS]
    db = open_database(tmp_path / "cove.db").db
    columns = {c.name for c in db.table("connections").columns}
    assert columns == {"name", "base_url", "ca_file", "server", "public_ok", "created_at"}
    assert "ran_on" in {c.name for c in db.table("record_entries").columns}
    db.close()
    with sqlite3.connect(tmp_path / "cove.db") as conn:
        assert conn.execute("SELECT name FROM _migrations WHERE name = '0010_connections'").fetchone()


def test_without_a_secure_keyring_the_key_lasts_this_run_and_the_person_is_told(tmp_path: Path) -> None:
    db = open_database(tmp_path / "cove.db").db
    connections = Connections(db, ConnectionKeys(NoBackend("no keyring backend was found")))
    connections.add("box", "http://127.0.0.1:8080", key=SERVER_KEY)
    assert connections.last_notice == (
        "No secure keyring is available on this system (no keyring backend was found), so the key is kept in memory for this run only."
    )
    assert connections.key("box") == SERVER_KEY
    assert Connections(db, ConnectionKeys(NoBackend("none"))).key("box") is None  # another run: gone
    for keyring, words in ((LockedKeyring(), "the keyring is locked"), (RefusingKeyring(), "refused to store it")):
        keys = ConnectionKeys(keyring)
        connections = Connections(db, keys)
        named = f"box-{type(keyring).__name__.lower()}"
        connections.add(named, "http://127.0.0.1:8080", key=SERVER_KEY)
        notice = connections.last_notice or ""
        assert words in notice and "kept in memory for this run only" in notice and SERVER_KEY not in notice
        assert keys.get(named) == SERVER_KEY  # kept in memory for the run
    db.close()
    assert files_containing(tmp_path, SERVER_KEY) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://gpu-box.lan:8000", "http://gpu-box.lan:8000/v1"),
        ("HTTPS://Box.Example/", "https://box.example/v1"),
        ("http://10.0.0.2:11434/v1/", "http://10.0.0.2:11434/v1"),
        ("http://10.0.0.2:8000/v1/models", "http://10.0.0.2:8000/v1"),
        ("http://[::1]:9000/openai/v1", "http://[::1]:9000/openai/v1"),
    ],
)
def test_addresses_are_normalised(url: str, expected: str) -> None:
    assert normalise_url(url) == expected


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("gpu-box:8000", "Start the server's address with http:// or https://"),
        ("ftp://box/v1", "not ftp://"),
        ("http://user:secret@box/v1", "Leave the user name and password out"),
        ("http://box/v1?key=1", "query"),
        ("http://:8000/v1", "names no server"),
        ("http://box:99999/v1", "not a number from 1 to 65535"),
        ("", "Start the server's address"),
    ],
)
def test_bad_addresses_are_sentences(url: str, words: str) -> None:
    with pytest.raises(ConnectionProblem) as refused:
        normalise_url(url)
    assert words in str(refused.value) and "secret" not in str(refused.value)


def test_names_keys_and_duplicates_are_checked(tmp_path: Path) -> None:
    connections = Connections(open_database(tmp_path / "cove.db").db, ConnectionKeys(InMemoryKeyring()))
    for bad in ("", "-box", "a b", "x" * 41, "box@home", "ümlaut"):
        with pytest.raises(ConnectionProblem, match="cannot name a connection"):
            connections.add(bad, "http://127.0.0.1:8000")
    connections.add("box", "http://127.0.0.1:8000")
    with pytest.raises(ConnectionProblem, match="A connection named box already exists"):
        connections.add("BOX", "http://127.0.0.1:9000")
    for bad_key, words in (("two words", "one word"), ("Bearer abc", "without 'Bearer'"), ("ключ", "ASCII"), ("k" * 5000, "too long")):
        with pytest.raises(ConnectionProblem, match=words) as refused:
            connections.add("keyed", "http://127.0.0.1:8000", key=bad_key)
        assert bad_key not in str(refused.value)
    assert [c.name for c in connections.list()] == ["box"]  # a refused add leaves nothing behind


def test_remote_names_split_on_the_last_at() -> None:
    assert split_remote_name("llama3.2:3b@gpu-box") == ("llama3.2:3b", "gpu-box")
    assert split_remote_name("org/model@v2@box.lan") == ("org/model@v2", "box.lan")
    for not_remote in ("plain-model", "@box", "model@", "model@bad name", "model@-box"):
        assert split_remote_name(not_remote) is None
    model = RemoteModel("box", "m", "box:1", "vllm")
    assert model.name == "m@box" and model.sha256 is None and model.quant is None
