"""The token canary never leaks: not in log lines (redaction filter),
not in Cove's files, HF_HOME, stdout or stderr after a gated download, and not in a child
process's environment or argv."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import app.hub_token as secrets
from app import log_redact
from app.log_redact import RedactingFilter, install_redaction, redact, uninstall_redaction
from tests.support.fake_hub import VALID_TOKEN
from tests.support.keyrings import InMemoryKeyring, files_containing, use_keyring
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


# --- redact() -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"token={VALID_TOKEN}",
        f"Authorization: Bearer {VALID_TOKEN}",
        f"authorization: Bearer {VALID_TOKEN[3:]}",
        f"{{'authorization': 'Bearer {VALID_TOKEN}', 'user-agent': 'x'}}",
        f'{{"Authorization": "Bearer {VALID_TOKEN}"}}',
        f"headers=Headers({{'authorization': '[secure]', 'x': 'y'}}) bearer {VALID_TOKEN}",
        f"Authorization: Basic dXNlcjp{VALID_TOKEN[3:]}",
        f"https://huggingface.co/api?token={VALID_TOKEN}&x=1",
    ],
)
def test_redact_removes_tokens_and_credentials(text: str) -> None:
    cleaned = redact(text)
    assert VALID_TOKEN not in cleaned and VALID_TOKEN[3:] not in cleaned
    assert "***" in cleaned


def test_redact_leaves_ordinary_text_alone() -> None:
    for text in ("downloading model.gguf (42 MB) from bartowski/Qwen", "hf_hub_download", "status 401", ""):
        assert redact(text) == text


# --- the logging filter ---------------------------------------------------------------------------


@pytest.fixture
def captured_logs():
    """A handler on the root logger (DEBUG) that writes into a string; redaction installed."""
    uninstall_redaction()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    # models.network.prepare_hub_import() quiets huggingface_hub (ERROR) once any Hub call ran;
    # these tests want its debug lines to prove they are redacted.
    hub_logger = logging.getLogger("huggingface_hub")
    old_hub_level = hub_logger.level
    hub_logger.setLevel(logging.DEBUG)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    install_redaction()
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        hub_logger.setLevel(old_hub_level)
        uninstall_redaction()


def test_filter_redacts_root_child_and_third_party_loggers(captured_logs: io.StringIO) -> None:
    logging.getLogger().info("root sees %s", VALID_TOKEN)
    logging.getLogger("huggingface_hub.file_download").debug("Authorization: Bearer %s", VALID_TOKEN)
    logging.getLogger("httpx").info("request headers %r", {"authorization": f"Bearer {VALID_TOKEN}"})
    logging.getLogger("somebody.else.entirely").warning(f"formatted up front {VALID_TOKEN}")
    logging.getLogger("app.downloads").info("%(who)s used %(token)s", {"who": "me", "token": VALID_TOKEN})
    try:
        raise RuntimeError(f"the Hub said no to {VALID_TOKEN}")
    except RuntimeError:
        logging.getLogger("huggingface_hub").exception("download failed")
    logging.getLogger("app").info("stack", stack_info=True, extra={"note": "x"})
    text = captured_logs.getvalue()
    assert VALID_TOKEN not in text and VALID_TOKEN[3:] not in text
    assert text.count("hf_***") >= 4 and "Authorization: ***" in text
    assert "RuntimeError: the Hub said no to hf_***" in text  # the traceback is kept, redacted
    assert "me used hf_***" in text


def test_handlers_added_later_are_covered_too(captured_logs: io.StringIO) -> None:
    late = io.StringIO()
    handler = logging.StreamHandler(late)
    logging.getLogger("huggingface_hub").addHandler(handler)
    try:
        logging.getLogger("huggingface_hub.utils").warning("token %s", VALID_TOKEN)
    finally:
        logging.getLogger("huggingface_hub").removeHandler(handler)
    assert "hf_***" in late.getvalue() and VALID_TOKEN not in late.getvalue()


def test_a_record_that_skipped_the_factory_is_redacted_by_the_filter(captured_logs: io.StringIO) -> None:
    record = logging.makeLogRecord({"name": "root", "levelno": logging.INFO, "levelname": "INFO", "msg": f"x {VALID_TOKEN}"})
    logging.getLogger().handle(record)
    assert VALID_TOKEN not in captured_logs.getvalue() and "x hf_***" in captured_logs.getvalue()


def test_install_is_idempotent_and_undoable() -> None:
    uninstall_redaction()
    factory = logging.getLogRecordFactory()
    try:
        install_redaction()
        install_redaction()
        for name in ("", "huggingface_hub", "httpx"):
            filters = [f for f in logging.getLogger(name or None).filters if isinstance(f, RedactingFilter)]
            assert len(filters) == 1, name
        assert logging.getLogRecordFactory() is log_redact._redacting_factory
        record = logging.getLogRecordFactory()("n", logging.INFO, __file__, 1, "t %s", (VALID_TOKEN,), None)
        assert record.getMessage() == "t hf_***"
    finally:
        uninstall_redaction()
    assert logging.getLogRecordFactory() is factory
    assert not [f for f in logging.getLogger().filters if isinstance(f, RedactingFilter)]


def test_cli_main_installs_redaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from app.cli.main import main

    uninstall_redaction()
    monkeypatch.setenv("COVE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    try:
        with use_keyring(InMemoryKeyring()):
            assert main(["auth", "status", "--json"]) == 0
        assert any(isinstance(f, RedactingFilter) for f in logging.getLogger().filters)
    finally:
        uninstall_redaction()


# --- the canary after a real sign-in and a gated download -----------------------------------

DOWNLOAD_SCRIPT = textwrap.dedent(
    """
    import json, logging, os, sys
    from pathlib import Path
    from app.log_redact import install_redaction
    from app.paths import resolve_paths
    from app.hub_token import load_token
    from models.network import prepare_hub_import

    install_redaction()
    logs = resolve_paths().ensure().logs_dir
    logging.basicConfig(filename=logs / "cove.log", level=logging.DEBUG, format="%(name)s %(message)s")
    logging.getLogger().addHandler(logging.StreamHandler(sys.stderr))
    prepare_hub_import()
    import huggingface_hub

    token = load_token()
    assert token, "no token"
    path = huggingface_hub.hf_hub_download(
        "gated/model", "model.gguf", token=token, cache_dir=os.environ["HF_HOME"] + "/hub"
    )
    log = logging.getLogger("app.hub")
    log.debug("request headers %s", {"authorization": "Bearer " + token, "user-agent": "cove"})
    log.info("Authorization: Bearer %s", token)
    logging.getLogger("huggingface_hub.file_download").warning("retrying with token %s", token)
    try:
        raise RuntimeError("401 for token " + token)
    except RuntimeError:
        logging.getLogger("httpx").exception("request failed")
    print(json.dumps({"downloaded": Path(path).read_bytes().decode(), "env_has_token": token in repr(dict(os.environ))}))
    """
)


def test_canary_never_reaches_files_logs_or_output(tmp_path: Path, fake_hub) -> None:
    from tests.support.fake_hub import Fault

    fake_hub.add_repo("gated/model", {"model.gguf": b"GGUF pretend weights"}, gated=True)
    fake_hub.set_fault("gated/model", "model.gguf", Fault(redirect=True))  # as the Hub does for LFS files
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    env.update(
        COVE_HOME=str(tmp_path / "cove_home"),
        HF_HOME=str(tmp_path / "hf_home"),
        PYTHONPATH=str(ROOT),
        PYTHON_KEYRING_BACKEND="tests.support.keyrings.FileKeyring",
        COVE_TEST_KEYRING_FILE=str(tmp_path / "keyring" / "keyring.json"),
    )
    (tmp_path / "keyring").mkdir()

    def run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=180)

    runs = [
        run([sys.executable, "-m", "app.cli.main", "auth", "login"], stdin=VALID_TOKEN + "\n"),
        run([sys.executable, "-m", "app.cli.main", "auth", "status"]),
        run([sys.executable, "-m", "app.cli.main", "auth", "status", "--json"]),
        run([sys.executable, "-c", DOWNLOAD_SCRIPT]),
        run([sys.executable, "-m", "app.cli.main", "history", "list"]),
    ]
    for done in runs:
        assert done.returncode == 0, (done.args, done.stderr)
    result = json.loads(runs[3].stdout)
    # The test is not vacuous: the token really went to the Hub, and the log is written.
    assert result == {"downloaded": "GGUF pretend weights", "env_has_token": False}
    authorized = [r for r in fake_hub.requests if r.headers.get("authorization") == f"Bearer {VALID_TOKEN}"]
    assert authorized and all(r.host == "127.0.0.1" for r in authorized)
    cdn = [r for r in fake_hub.requests if r.host == "127.0.0.2"]
    assert cdn and not [r for r in cdn if "authorization" in r.headers]  # the redirect target never sees it
    log_text = (tmp_path / "cove_home" / "logs" / "cove.log").read_text()
    assert "'authorization': '***'" in log_text and "Authorization: ***" in log_text
    assert "retrying with token hf_***" in log_text and "RuntimeError: 401 for token hf_***" in log_text
    assert "httpcore" in log_text  # the HTTP client's own debug lines went to the same file

    for done in runs:
        assert VALID_TOKEN not in done.stdout + done.stderr
    assert files_containing(tmp_path / "cove_home", VALID_TOKEN) == []
    assert files_containing(tmp_path / "hf_home", VALID_TOKEN) == []
    assert not (tmp_path / "hf_home" / "token").exists()
    # The only copy is the (test) keyring.
    assert files_containing(tmp_path / "keyring", VALID_TOKEN) == [tmp_path / "keyring" / "keyring.json"]


# --- not in a child's environment or argv -------------------------------------------------------


@pytest.mark.parametrize("backend", ["keyring", "memory"])
def test_child_processes_never_see_the_token(tmp_path: Path, fake_engine, backend: str) -> None:
    from keyring.backends import fail

    secrets.PROCESS_MEMORY.clear()
    try:
        with use_keyring(InMemoryKeyring() if backend == "keyring" else fail.Keyring()):
            result = secrets.TokenStore().save(VALID_TOKEN)
            assert result.persisted is (backend == "keyring")
            assert secrets.load_token() == VALID_TOKEN
            assert VALID_TOKEN not in repr(dict(os.environ))
            model = tmp_path / "model.gguf"
            model.write_bytes(b"GGUF")
            fake_engine.load(model)
            pid = fake_engine.host_pid
            assert pid
            for name in ("environ", "cmdline"):
                data = Path(f"/proc/{pid}/{name}").read_bytes()
                assert VALID_TOKEN.encode() not in data and b"HF_TOKEN=" not in data
    finally:
        secrets.PROCESS_MEMORY.clear()
