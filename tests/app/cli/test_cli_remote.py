"""`cove remote add|list|models|remove` and `cove chat --model MODEL_ID@CONNECTION`, run as a person
runs them (subprocesses with their own COVE_HOME and a file keyring) against llama-cpp-python's own
server on 127.0.0.1: the key given on stdin reaches the server and nothing else (no argv, no file
under COVE_HOME, no output); a reply is streamed, kept in the history marked "on HOST" and in the
record with where it ran; Ctrl-C keeps the partial reply; every failure is one sentence, exit 1;
a host outside the private network is asked about once, and refused without a terminal."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_paths
from tests.support.fault_proxy import FaultProxy
from tests.support.keyrings import InMemoryKeyring, files_containing, use_keyring
from tests.support.llama_cpp_server import REMOTE_KEY, RemoteServer, running_server
from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteServer]:
    with running_server(tmp_path_factory.mktemp("server")) as running:
        yield running


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COVE_OFFLINE", "API_KEY")}
    env.update(
        COVE_HOME=str(tmp_path / "home"),
        PYTHONPATH=str(REPO_ROOT),
        PYTHON_KEYRING_BACKEND="tests.support.keyrings.FileKeyring",
        COVE_TEST_KEYRING_FILE=str(tmp_path / "keyring.json"),
        **extra,
    )
    return env


def cove(tmp_path: Path, *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=REPO_ROOT,
        env=_env(tmp_path, **extra),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


def one_sentence(done: subprocess.CompletedProcess, code: int = 1) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("cove: "), done.stderr
    return lines[-1]


def _add(tmp_path: Path, server: RemoteServer, name: str = "box") -> subprocess.CompletedProcess:
    done = cove(tmp_path, "remote", "add", name, server.base_url, "--key-stdin", stdin=REMOTE_KEY + "\n")
    assert done.returncode == 0, done.stderr
    return done


def _database(tmp_path: Path) -> Path:
    return resolve_paths({"COVE_HOME": str(tmp_path / "home")}).database


def test_add_list_models_remove_with_the_key_on_stdin(tmp_path: Path, server: RemoteServer) -> None:
    added = _add(tmp_path, server)
    assert f"Added box ({server.base_url})" in added.stdout
    assert "llama-cpp-python" in added.stdout and f"  {server.model_id}@box" in added.stdout
    keyring = json.loads((tmp_path / "keyring.json").read_text())
    assert keyring == {"cove/remote:box": REMOTE_KEY}  # the key is in the keyring, and only there

    listed = cove(tmp_path, "remote", "list")
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    assert line.split() == ["box", server.base_url, "llama-cpp-python", "1", "model", "key:", "yes"]
    (as_json,) = json.loads(cove(tmp_path, "remote", "list", "--json").stdout)
    assert as_json["name"] == "box" and as_json["key"] is True and as_json["host"] == server.host
    assert [m["name"] for m in as_json["models"]] == [f"{server.model_id}@box"] and as_json["kind"] == "llama-cpp-python"

    models = cove(tmp_path, "remote", "models", "box")  # asks the server again, with the stored key
    assert models.returncode == 0, models.stderr
    assert models.stdout.splitlines() == [f"{server.model_id}@box"]
    assert json.loads(cove(tmp_path, "remote", "models", "box", "--json").stdout)[0]["model_id"] == server.model_id

    for done in (added, listed, models):
        assert REMOTE_KEY not in done.stdout + done.stderr
    assert files_containing(tmp_path / "home", REMOTE_KEY) == []

    removed = cove(tmp_path, "remote", "remove", "box")
    assert removed.returncode == 0 and "Removed box" in removed.stdout and "its key" in removed.stdout
    assert json.loads((tmp_path / "keyring.json").read_text()) == {}
    assert "No connections yet" in cove(tmp_path, "remote", "list").stdout


def test_a_key_is_never_taken_as_an_argument(tmp_path: Path, server: RemoteServer) -> None:
    done = cove(tmp_path, "remote", "add", "box", server.base_url, REMOTE_KEY)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert REMOTE_KEY not in done.stderr + done.stdout and "never taken from the command line" in done.stderr
    # Without a terminal, the command must be told where the key comes from.
    line = one_sentence(cove(tmp_path, "remote", "add", "box", server.base_url))
    assert "--key-stdin" in line and "--no-key" in line
    assert "--key-stdin" in one_sentence(cove(tmp_path, "remote", "add", "box", server.base_url, "--key-stdin"))
    assert json.loads(cove(tmp_path, "remote", "list", "--json").stdout) == []  # nothing half-added


def test_a_wrong_or_missing_key_is_a_sentence(tmp_path: Path, server: RemoteServer) -> None:
    added = cove(tmp_path, "remote", "add", "box", server.base_url, "--no-key")
    assert added.returncode == 0  # kept, with the reason it could not be listed
    assert "it is kept" in added.stderr and "key" in added.stderr and "Traceback" not in added.stderr
    assert "key: no" in cove(tmp_path, "remote", "list").stdout
    assert "key" in one_sentence(cove(tmp_path, "remote", "models", "box"))


def test_failures_are_one_sentence(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    added = cove(tmp_path, "remote", "add", "down", down, "--no-key")
    assert added.returncode == 0 and f"Added down ({down})" in added.stdout
    assert "it is kept, but" in added.stderr and "127.0.0.1" in added.stderr
    assert "not reached yet" in cove(tmp_path, "remote", "list").stdout
    assert "127.0.0.1" in one_sentence(cove(tmp_path, "remote", "models", "down"))
    assert "already exists" in one_sentence(cove(tmp_path, "remote", "add", "down", down, "--no-key"))
    assert "http" in one_sentence(cove(tmp_path, "remote", "add", "other", "ftp://example.org", "--no-key"))
    assert "cannot name a connection" in one_sentence(cove(tmp_path, "remote", "add", "-bad name", down, "--no-key"))
    assert "no connection named nope" in one_sentence(cove(tmp_path, "remote", "remove", "nope")).lower()
    assert "no connection named nope" in one_sentence(cove(tmp_path, "remote", "models", "nope")).lower()


def test_an_unreachable_connection_keeps_the_message(tmp_path: Path) -> None:
    cove(tmp_path, "remote", "add", "down", f"http://127.0.0.1:{free_port()}/v1", "--no-key")
    done = cove(tmp_path, "chat", "--model", "tiny@down", "--new", "are you there?")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "127.0.0.1" in done.stderr and "[tiny@down on 127.0.0.1:" in done.stderr
    (conversation,) = json.loads(cove(tmp_path, "history", "list", "--json").stdout)
    shown = json.loads(cove(tmp_path, "history", "show", conversation["id"], "--json").stdout)
    user, reply = shown["messages"]
    assert user["content"] == "are you there?" and reply["status"] == "error" and reply["error"]


def test_a_remote_chat_streams_and_is_recorded_with_where_it_ran(tmp_path: Path, server: RemoteServer) -> None:
    _add(tmp_path, server)
    name = f"{server.model_id}@box"
    done = cove(tmp_path, "chat", "--model", name, "--new", "--max-tokens", "10", "--temperature", "0", "hello there")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() and f"[{name} on {server.host} · complete" in done.stderr or "· length" in done.stderr
    assert "tok/s" in done.stderr

    (conversation,) = json.loads(cove(tmp_path, "history", "list", "--json").stdout)
    assert conversation["model"] == name
    assert f"[on {server.host}] hello there" in cove(tmp_path, "history", "list").stdout
    shown = json.loads(cove(tmp_path, "history", "show", conversation["id"], "--json").stdout)
    reply = shown["messages"][1]
    assert reply["content"].rstrip("\n") == done.stdout.rstrip("\n") and reply["model_name"] == name
    assert reply["metrics"]["remote"]["host"] == server.host and reply["metrics"]["gen_tokens"] >= 1
    assert f"[{name} on {server.host} · " in cove(tmp_path, "history", "show", conversation["id"]).stdout

    # A follow-up in the same conversation, as JSON: the whole conversation is sent again.
    again = cove(tmp_path, "chat", "--model", name, "--max-tokens", "6", "--temperature", "0", "--json", "and again")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["conversation_id"] == conversation["id"] and result["metrics"]["remote"]["connection"] == "box"

    exported = [json.loads(line) for line in cove(tmp_path, "record", "export").stdout.splitlines()]
    assert [e["model_name"] for e in exported] == [name, name] and [e["client"] for e in exported] == ["command line"] * 2
    assert json.loads(exported[0]["ran_on"]) == {
        "connection": "box",
        "host": server.host,
        "kind": "llama-cpp-python",
        "model_id": server.model_id,
        "fingerprint": None,
    }
    assert len(json.loads(exported[1]["messages"])) == 3  # user, assistant, user
    csv = cove(tmp_path, "record", "export", "--format", "csv").stdout
    assert "ran_on" in csv.splitlines()[0]
    verified = cove(tmp_path, "record", "verify")
    assert verified.returncode == 0 and "2 entries: intact" in verified.stdout

    for output in (done, again):
        assert REMOTE_KEY not in output.stdout + output.stderr
    assert files_containing(tmp_path / "home", REMOTE_KEY) == []

    # Saying by hand that the first reply ran somewhere else is caught.
    with sqlite3.connect(_database(tmp_path)) as db:
        db.execute(
            "UPDATE record_entries SET ran_on = ? WHERE seq = 1", [json.dumps({"connection": "box", "host": "elsewhere.example:8000"})]
        )
    tampered = cove(tmp_path, "record", "verify")
    assert tampered.returncode == 1 and "NOT INTACT" in tampered.stdout
    assert "Entries changed (their fields, text or links do not match): 1." in tampered.stdout


def test_ctrl_c_keeps_the_partial_remote_reply(tmp_path: Path, server: RemoteServer) -> None:
    # The server sends a few pieces of the reply and then nothing (the stream held open): Ctrl-C
    # must end it at once, as cancelled, with what was shown.
    with FaultProxy(server.base_url.removesuffix("/v1"), mode="stall", after_events=6) as proxy:
        added = cove(tmp_path, "remote", "add", "slow", f"{proxy.url}/v1", "--key-stdin", stdin=REMOTE_KEY + "\n")
        assert added.returncode == 0, added.stderr
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli.main",
                "chat",
                "--model",
                f"{server.model_id}@slow",
                "--new",
                "--max-tokens",
                "100",
                "--temperature",
                "0",
                "hello there",
            ],
            cwd=REPO_ROOT,
            env=_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        printed = os.read(proc.stdout.fileno(), 4096)  # the first piece of the reply
        # While it streams, neither Cove's arguments nor its environment hold the key.
        for part in ("cmdline", "environ"):
            assert REMOTE_KEY.encode() not in Path(f"/proc/{proc.pid}/{part}").read_bytes()
        time.sleep(0.5)  # the rest of what the server sends arrives; then it is silent
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    printed += rest
    assert b"Traceback" not in err and b"cancelled" in err
    (conversation,) = json.loads(cove(tmp_path, "history", "list", "--json").stdout)
    reply = json.loads(cove(tmp_path, "history", "show", conversation["id"], "--json").stdout)["messages"][1]
    assert reply["status"] == "cancelled" and reply["content"]
    # What was shown is kept (and a piece that arrived as Ctrl-C was pressed, before it was printed).
    assert reply["content"].startswith(printed.decode().rstrip("\n"))
    assert 1 <= reply["metrics"]["gen_tokens"] < 100 and reply["metrics"]["stop_reason"] == "cancelled"


def test_offline_refuses_before_anything_is_saved(tmp_path: Path, server: RemoteServer) -> None:
    _add(tmp_path, server)
    line = one_sentence(cove(tmp_path, "chat", "--model", f"{server.model_id}@box", "--new", "hi", COVE_OFFLINE="1"))
    assert "offline" in line.lower() and "COVE_OFFLINE" in line
    assert json.loads(cove(tmp_path, "history", "list", "--json").stdout) == []
    assert "offline" in one_sentence(cove(tmp_path, "remote", "models", "box", COVE_OFFLINE="1")).lower()


def test_an_unknown_model_of_a_connection_is_a_sentence(tmp_path: Path, server: RemoteServer) -> None:
    _add(tmp_path, server)
    line = one_sentence(cove(tmp_path, "chat", "--model", "nope@box", "--new", "hi"))
    assert "nope" in line and "cove remote models box" in line
    assert "no connection named 'elsewhere'" in one_sentence(cove(tmp_path, "chat", "--model", "x@elsewhere", "hi"))


def test_a_public_host_is_refused_without_a_terminal(tmp_path: Path) -> None:
    # 203.0.113.0/24 is reserved for documentation: not private, and nothing here ever connects to it.
    added = cove(tmp_path, "remote", "add", "far", "http://203.0.113.7:8000/v1", "--no-key", COVE_OFFLINE="1")
    assert added.returncode == 0 and "offline" in added.stderr.lower()
    line = one_sentence(cove(tmp_path, "chat", "--model", "big@far", "--new", "a secret"))
    assert "203.0.113.7:8000" in line and "--allow-host 203.0.113.7:8000" in line
    assert "wrong.example" in one_sentence(cove(tmp_path, "chat", "--model", "big@far", "--allow-host", "wrong.example", "hi"))
    assert json.loads(cove(tmp_path, "history", "list", "--json").stdout) == []  # nothing was kept, nothing sent
    assert json.loads(cove(tmp_path, "remote", "list", "--json").stdout)[0]["public_ok"] is False


# --- the consent question, in-process (the loopback server stands in for a host outside the network) ---


@pytest.fixture
def in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: RemoteServer):
    import app.cli.chat_remote as chat_remote
    from app.cli.main import main
    from app.log_redact import uninstall_redaction

    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    asked: list[str] = []

    def not_private(host: str) -> bool:
        asked.append(host)
        return False

    monkeypatch.setattr(chat_remote, "is_private_host", not_private)

    def run(*args: str, stdin: str = "", terminal: bool = False) -> int:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        monkeypatch.setattr(chat_remote, "isatty", lambda stream: terminal)
        try:
            return main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)

    with use_keyring(InMemoryKeyring()):
        assert run("remote", "add", "box", server.base_url, "--key-stdin", stdin=REMOTE_KEY + "\n") == 0
        yield run, asked
    uninstall_redaction()


def test_the_first_message_to_a_public_host_asks_once(in_process, server: RemoteServer, capsys) -> None:
    run, asked = in_process
    name = f"{server.model_id}@box"
    capsys.readouterr()
    assert run("chat", "--model", name, "--new", "--max-tokens", "4", "hi", stdin="n\n", terminal=True) == 1
    err = capsys.readouterr().err
    assert f"Your messages will be sent to {server.host}. Send them? [y/N]" in err and "nothing was sent" in err
    assert asked == [server.host]
    assert run("chat", "--model", name, "--new", "--max-tokens", "4", "hi", stdin="y\n", terminal=True) == 0
    assert "Send them?" in capsys.readouterr().err
    # Asked once: the answer is kept with the connection.
    assert run("chat", "--model", name, "--max-tokens", "4", "again", terminal=False) == 0
    assert "Send them?" not in capsys.readouterr().err
    assert run("history", "list", "--json") == 0
    (conversation,) = json.loads(capsys.readouterr().out)
    assert conversation["message_count"] == 4  # the refused message was never saved


def test_allow_host_confirms_without_a_terminal(in_process, server: RemoteServer, capsys) -> None:
    run, _ = in_process
    name = f"{server.model_id}@box"
    assert run("chat", "--model", name, "--new", "--max-tokens", "4", "hi") == 1
    assert f"--allow-host {server.host}" in capsys.readouterr().err
    assert run("chat", "--model", name, "--new", "--max-tokens", "4", "--allow-host", server.host, "hi") == 0
    capsys.readouterr()
    assert run("remote", "list", "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["public_ok"] is True


# --- on a real terminal (a pty) ---------------------------------------------------------------


def _on_a_terminal(tmp_path: Path, args: list[str], steps: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """Run `cove ARGS` with a pty as its terminal; for each (prompt, answer) wait for the prompt
    and type the answer. Returns (exit code, everything the terminal showed)."""
    import pty
    import select

    env = _env(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # child: the terminal is the pty
        os.chdir(REPO_ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "app.cli.main", *args], env)
    seen = b""

    def read_until(marker: bytes | None, timeout: float = 60) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while (marker is None or marker not in seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    return
                if not chunk:
                    return
                seen += chunk

    try:
        for prompt, answer in steps:
            read_until(prompt)
            assert prompt in seen, seen
            for name in ("cmdline", "environ"):
                assert REMOTE_KEY.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
            os.write(fd, answer + b"\r")
        read_until(None)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen


def test_the_key_is_asked_for_on_a_terminal_without_echo(tmp_path: Path, server: RemoteServer) -> None:
    code, seen = _on_a_terminal(tmp_path, ["remote", "add", "box", server.base_url], [(b"input hidden", REMOTE_KEY.encode())])
    assert code == 0, seen
    assert b"Added box" in seen and f"{server.model_id}@box".encode() in seen  # the key reached the server
    assert REMOTE_KEY.encode() not in seen  # getpass turned echo off
    assert json.loads((tmp_path / "keyring.json").read_text()) == {"cove/remote:box": REMOTE_KEY}
    assert files_containing(tmp_path / "home", REMOTE_KEY) == []


def test_a_public_host_is_asked_about_once_on_a_terminal(tmp_path: Path) -> None:
    # Added offline, so nothing connects to the documentation address; answering no sends nothing.
    assert cove(tmp_path, "remote", "add", "far", "http://203.0.113.7:8000/v1", "--no-key", COVE_OFFLINE="1").returncode == 0
    code, seen = _on_a_terminal(tmp_path, ["chat", "--model", "big@far", "--new", "a secret"], [(b"Send them? [y/N]", b"n")])
    assert code == 1 and b"Your messages will be sent to 203.0.113.7:8000. Send them? [y/N]" in seen
    assert b"nothing was sent to 203.0.113.7:8000" in seen and b"Traceback" not in seen
    assert json.loads(cove(tmp_path, "history", "list", "--json").stdout) == []
    assert json.loads(cove(tmp_path, "remote", "list", "--json").stdout)[0]["public_ok"] is False
