"""`cove auth login|status|logout`: token from a prompt or stdin (never argv), status without the
token, logout; in-process with test keyrings, and as real `cove` processes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from keyring.backends import fail

import app.hub_token as secrets
from app.cli.main import main
from app.hub_token import USERNAME
from app.keyring_policy import SERVICE, describe_backend
from app.log_redact import uninstall_redaction
from tests.support.fake_hub import VALID_TOKEN
from tests.support.keyrings import InMemoryKeyring, LockedKeyring, files_containing, use_keyring
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    homes = {"COVE_HOME": tmp_path / "cove_home", "HF_HOME": tmp_path / "hf_home"}
    for name, path in homes.items():
        monkeypatch.setenv(name, str(path))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    secrets.PROCESS_MEMORY.clear()
    yield homes
    secrets.PROCESS_MEMORY.clear()
    uninstall_redaction()  # main() installs it; leave logging as the next test expects it


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_no_canary_anywhere(homes: dict[str, Path], *texts: str) -> None:
    for text in texts:
        assert VALID_TOKEN not in text
    for root in homes.values():
        assert files_containing(root, VALID_TOKEN) == [], root
    assert not (homes["HF_HOME"] / "token").exists()
    assert not (homes["HF_HOME"] / "stored_tokens").exists()


def test_login_from_stdin_then_status_then_logout(env, monkeypatch, capsys) -> None:
    with use_keyring(InMemoryKeyring()) as kr:
        code, out, err = run(monkeypatch, capsys, "auth", "login", stdin=VALID_TOKEN + "\n")
        assert code == 0, err
        assert f"Signed in: the token is saved in the {describe_backend(kr)}." in out  # names the keyring it went to
        assert kr.passwords == {(SERVICE, USERNAME): VALID_TOKEN}
        texts = [out, err]

        code, out, err = run(monkeypatch, capsys, "auth", "status", "--json")
        assert code == 0
        status = json.loads(out)
        assert status["present"] is True and status["storage"] == "keyring" and status["secure"] is True
        assert set(status) == {"present", "storage", "backend", "secure", "notice"}
        texts += [out, err]

        code, out, err = run(monkeypatch, capsys, "auth", "status")
        assert code == 0 and out.startswith("Signed in: a token is saved in the")
        texts += [out, err]

        code, out, err = run(monkeypatch, capsys, "auth", "logout")
        assert code == 0 and "Signed out" in out
        assert kr.passwords == {}
        texts += [out, err]

        code, out, err = run(monkeypatch, capsys, "auth", "status", "--json")
        assert json.loads(out)["present"] is False and json.loads(out)["storage"] == "none"
        code, out, err = run(monkeypatch, capsys, "auth", "logout")
        assert code == 0 and "nothing to remove" in out
    assert_no_canary_anywhere(env, *texts)


@pytest.mark.parametrize(
    "args",
    [
        ("auth", "login", VALID_TOKEN),
        ("auth", "login", "--token", VALID_TOKEN),
        ("auth", "login", f"--token={VALID_TOKEN}"),
        ("auth", "login", f"--anything-else={VALID_TOKEN}"),
        ("auth", "login", "--", VALID_TOKEN),
        ("auth", VALID_TOKEN),
        ("auth", "status", "--json", VALID_TOKEN),
        ("auth", "logout", VALID_TOKEN),
    ],
)
def test_a_token_on_the_command_line_is_a_usage_error_that_does_not_echo_it(env, monkeypatch, capsys, args) -> None:
    with use_keyring(InMemoryKeyring()) as kr:
        code, out, err = run(monkeypatch, capsys, *args)
        assert code == 2
        assert "usage:" in err and "Traceback" not in err
        assert kr.passwords == {} and kr.set_calls == 0
    assert_no_canary_anywhere(env, out, err)


def test_login_has_no_argument_for_the_token(capsys) -> None:
    from app.cli.main import build_parser

    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["auth", "login", "--help"])
    assert done.value.code == 0
    usage = capsys.readouterr().out.splitlines()[0]
    assert usage.split() == ["usage:", "cove", "auth", "login", "[-h]"]  # -h alone: nothing takes the token


def test_without_a_secure_keyring_login_says_the_token_is_gone(env, monkeypatch, capsys) -> None:
    with use_keyring(fail.Keyring()):
        code, out, err = run(monkeypatch, capsys, "auth", "login", stdin=VALID_TOKEN + "\n")
        assert code == 1
        assert "No secure keyring" in err and "nothing was saved" in err and "secure keyring" in err
        assert "Traceback" not in err
        # In a real `cove auth login` process the memory goes with the process; in this test
        # process it stays until cleared, and status says so.
        code, out2, err2 = run(monkeypatch, capsys, "auth", "status", "--json")
        assert json.loads(out2)["storage"] == "memory"
        secrets.PROCESS_MEMORY.clear()
        code, out2, err2 = run(monkeypatch, capsys, "auth", "status")
        assert code == 0 and "Not signed in" in out2 and "No secure keyring" in out2
    assert_no_canary_anywhere(env, out, err, out2, err2)


def test_locked_keyring_is_one_sentence(env, monkeypatch, capsys) -> None:
    with use_keyring(LockedKeyring()):
        code, out, err = run(monkeypatch, capsys, "auth", "login", stdin=VALID_TOKEN)
        assert code == 1 and "locked" in err and "Traceback" not in err
        secrets.PROCESS_MEMORY.clear()
        code, out, err2 = run(monkeypatch, capsys, "auth", "status", "--json")
        assert code == 0 and "locked" in json.loads(out)["notice"]
        code, out, err3 = run(monkeypatch, capsys, "auth", "logout")
        assert code == 1 and "locked" in err3 and "Traceback" not in err3
    assert_no_canary_anywhere(env, out, err, err2, err3)


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [("", "no token was given"), ("\n", "no token was given"), ("hf_x y z\n", "no spaces"), ("ghp_notahftoken123\n", "start with hf_")],
)
def test_bad_stdin_is_one_sentence(env, monkeypatch, capsys, stdin, expected) -> None:
    with use_keyring(InMemoryKeyring()) as kr:
        code, out, err = run(monkeypatch, capsys, "auth", "login", stdin=stdin)
    assert code == 1 and expected in err and kr.passwords == {}
    assert "Traceback" not in err


def test_status_points_out_huggingface_tokens_cove_ignores(env, monkeypatch, capsys) -> None:
    env["HF_HOME"].mkdir(parents=True)
    (env["HF_HOME"] / "token").write_text("hf_someoneElsesTokenFile1234")
    monkeypatch.setenv("HF_TOKEN", "hf_fromTheEnvironment1234")
    with use_keyring(InMemoryKeyring()):
        code, out, err = run(monkeypatch, capsys, "auth", "status")
    assert code == 0 and "Not signed in" in out
    assert "HF_TOKEN is set in the environment" in out and "token file" in out
    assert "hf_someone" not in out and "hf_fromThe" not in out


# --- as real processes -------------------------------------------------------------------------


def cove(tmp_path: Path, *args: str, stdin: str = "", backend: str = "tests.support.keyrings.FileKeyring") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    env.update(
        COVE_HOME=str(tmp_path / "cove_home"),
        HF_HOME=str(tmp_path / "hf_home"),
        PYTHONPATH=str(ROOT),
        PYTHON_KEYRING_BACKEND=backend,
        COVE_TEST_KEYRING_FILE=str(tmp_path / "keyring.json"),
    )
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


def test_login_status_logout_as_separate_processes(tmp_path: Path) -> None:
    done = cove(tmp_path, "auth", "login", stdin=VALID_TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "keyring.json").read_text()) == {f"{SERVICE}/{USERNAME}": VALID_TOKEN}
    status = cove(tmp_path, "auth", "status", "--json")
    assert json.loads(status.stdout)["storage"] == "keyring"
    out = cove(tmp_path, "auth", "logout")
    assert out.returncode == 0
    assert json.loads(cove(tmp_path, "auth", "status", "--json").stdout)["present"] is False
    for d in (done, status, out):
        assert VALID_TOKEN not in d.stdout + d.stderr
    homes = {"COVE_HOME": tmp_path / "cove_home", "HF_HOME": tmp_path / "hf_home"}
    assert_no_canary_anywhere(homes)


def test_no_keyring_process_exits_1_and_keeps_nothing(tmp_path: Path) -> None:
    done = cove(tmp_path, "auth", "login", stdin=VALID_TOKEN, backend="keyring.backends.fail.Keyring")
    assert done.returncode == 1
    assert "gone as soon as `cove auth login` exits" in done.stderr and "Traceback" not in done.stderr
    status = cove(tmp_path, "auth", "status", "--json", backend="keyring.backends.fail.Keyring")
    assert json.loads(status.stdout)["present"] is False
    homes = {"COVE_HOME": tmp_path / "cove_home", "HF_HOME": tmp_path / "hf_home"}
    assert_no_canary_anywhere(homes, done.stdout, done.stderr)


def test_terminal_prompt_does_not_echo_and_argv_has_no_token(tmp_path: Path) -> None:
    import pty
    import select
    import time

    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    env.update(
        COVE_HOME=str(tmp_path / "cove_home"),
        HF_HOME=str(tmp_path / "hf_home"),
        PYTHONPATH=str(ROOT),
        PYTHON_KEYRING_BACKEND="tests.support.keyrings.FileKeyring",
        COVE_TEST_KEYRING_FILE=str(tmp_path / "keyring.json"),
    )
    pid, fd = pty.fork()
    if pid == 0:  # child: the terminal is the pty
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "app.cli.main", "auth", "login"], env)
    seen = b""

    def read_until(marker: bytes, timeout: float = 60) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk

    try:
        read_until(b"input hidden")
        assert b"input hidden" in seen, seen
        for name in ("cmdline", "environ"):
            assert VALID_TOKEN.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
        os.write(fd, VALID_TOKEN.encode() + b"\r")
        read_until(b"Signed in")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert b"Signed in" in seen
    assert VALID_TOKEN.encode() not in seen  # getpass turned echo off
    assert json.loads((tmp_path / "keyring.json").read_text()) == {f"{SERVICE}/{USERNAME}": VALID_TOKEN}
