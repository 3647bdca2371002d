"""`cove chat --tools` end to end, as a person runs it: a subprocess with its own COVE_HOME, the
tiny random-weight model written with Qwen 2.5's (Hermes-style) chat template and imported with
`cove models import`, the real engine forcing the first call with the tools' grammar, and real
tool servers (mcp-server-time; the fault server, which notes every call that reaches it).

The random-weight model writes a forced string argument as random text that rarely ends: 64
tokens cut the call before its closing quote, and the reply then ends at its token limit with no
call run. So the settings file gives the '"' token a logit bias and the chats use temperature 0:
each string argument is "" at once and every run is the same. What is asserted is what is
deterministic (a call ran or was denied, its result is stored and recorded), never the time.

The step limit needs a model that calls again after a result, which the random model under
tool_choice "auto" never does; that case replays a model's output through the scripted fake
engine host, with `cove chat` run in-process.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from app.paths import resolve_paths
from tests.app.mcp.conftest import FAULT_SERVER
from tests.support.cli import cove
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tool_turns import QUOTE_TOKEN, QWEN_TEMPLATE

CHAT = ("chat", "--new", "--model", "qwentools", "--temperature", "0", "--tool-choice", "required", "--max-tokens", "128")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    model = write_tiny_gguf(tmp_path / "qwentools.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096)
    done = cove(tmp_path, "models", "import", str(model))
    assert done.returncode == 0, done.stderr
    settings = resolve_paths({"COVE_HOME": str(tmp_path)}).settings_file
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"sampling": {"logit_bias": [[QUOTE_TOKEN, 10.0]]}}))
    return tmp_path


def _record(home: Path) -> list[dict]:
    done = cove(home, "record", "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _messages(home: Path, conversation_id: str) -> list[dict]:
    done = cove(home, "history", "show", conversation_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["messages"]


def test_a_forced_call_runs_on_the_time_server_and_is_stored_and_recorded(home: Path) -> None:
    added = cove(home, "tools", "add", "time", "--", sys.executable, "-m", "mcp_server_time")
    assert added.returncode == 0, added.stderr
    assert f"  {sys.executable} -m mcp_server_time\nNothing was started." in added.stdout
    assert not (home / "logs" / "tool-servers.log").exists()

    done = cove(home, *CHAT, "--tools", "time", "--allow-tools", "What time is it in Tokyo?")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    called = re.search(r"^\[tool call: time/(\w+) (\{.*\})\]$", done.stderr, re.M)
    assert called, done.stderr
    tool, arguments = called.group(1), json.loads(called.group(2))
    assert re.search(r"^\[tool result \((ok|tool_error)\): ", done.stderr, re.M), done.stderr

    entries = _record(home)
    assert [e["endpoint"] for e in entries] == ["chat", f"tool:time/{tool}", "chat"]
    entry = entries[1]
    params = json.loads(entry["params"])
    assert params["decision"] == "once" and "--allow-tools" in params["approved_by"]
    assert params["server"] == "time" and params["server_identity"] == f"{sys.executable} -m mcp_server_time"
    assert params["arguments"] == arguments and entry["reply"]  # the server's answer, an error or a time
    assert len({e["conversation_id"] for e in entries}) == 1

    messages = _messages(home, entries[0]["conversation_id"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert messages[0]["content"] == "What time is it in Tokyo?"
    assert "<tool_call>" not in messages[1]["content"] and messages[1]["status"] == "complete"
    assert messages[2]["content"].startswith(f"{tool} ") and messages[2]["params"]["server"] == "time"
    assert messages[3]["content"] == entry["reply"]  # the result as the model read it is the recorded one
    assert messages[4]["status"] in ("complete", "length")

    verified = cove(home, "record", "verify")
    assert verified.returncode == 0 and "3 entries: intact" in verified.stdout, verified.stdout + verified.stderr


def test_without_allow_tools_and_no_terminal_each_call_is_denied_and_the_reply_goes_on(home: Path) -> None:
    calls_file = home / "calls.txt"
    cove(home, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))

    done = cove(home, *CHAT, "--tools", "fault", "Say hi through the tool", stdin="")
    assert done.returncode == 0, done.stderr
    assert "there is no terminal to ask, so it was denied (run with --allow-tools" in done.stderr
    assert re.search(r"^\[tool result \(denied\): ", done.stderr, re.M), done.stderr
    assert not calls_file.exists() or calls_file.read_text() == ""  # the server never saw a call

    entries = _record(home)
    assert [e["endpoint"].split("/")[0] for e in entries] == ["chat", "tool:fault", "chat"]
    params = json.loads(entries[1]["params"])
    assert params["decision"] == "deny"
    messages = _messages(home, entries[0]["conversation_id"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert messages[3]["content"] == entries[1]["reply"] and "denied" in messages[3]["content"]
    assert cove(home, "record", "verify").returncode == 0


def test_offline_the_servers_start_only_with_allow_offline_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls_file = home / "calls.txt"
    cove(home, "tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    monkeypatch.setenv("COVE_OFFLINE", "1")

    refused = cove(home, *CHAT, "--tools", "fault", "--allow-tools", "Say hi through the tool")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "Cove is offline, so the tool servers were not started" in refused.stderr
    assert "--allow-offline-once" in refused.stderr
    assert not calls_file.exists()  # the server never started (it makes the file when it starts)
    assert not (home / "logs" / "tool-servers.log").exists()

    done = cove(home, *CHAT, "--tools", "fault", "--allow-tools", "--allow-offline-once", "Say hi through the tool")
    assert done.returncode == 0, done.stderr
    assert calls_file.exists() and calls_file.read_text().split()  # started, and the forced call ran


CALL = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>'


def test_the_step_limit_ends_the_turn_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every reply of the replayed model calls echo; with --max-tool-steps 1 the first call runs
    and the second reply's call does not."""
    from app.cli.main import main
    from app.core import Core
    from tests.conftest import FAKE_HOST

    home = tmp_path / "home"
    monkeypatch.setenv("COVE_HOME", str(home))
    pieces = tmp_path / "pieces.json"
    pieces.write_text(json.dumps([CALL[i : i + 7] for i in range(0, len(CALL), 7)]))
    monkeypatch.setenv("FAKE_HOST_PIECES", str(pieces))
    real = Core.engine_client
    monkeypatch.setattr(Core, "engine_client", lambda self, host_argv=None: real(self, [sys.executable, str(FAKE_HOST)]))
    model = write_tiny_gguf(tmp_path / "qwentools.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096)
    calls_file = tmp_path / "calls.txt"
    assert main(["models", "import", str(model)]) == 0
    assert main(["tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file)]) == 0
    capsys.readouterr()

    assert (
        main(
            [
                "chat",
                "--new",
                "--model",
                "qwentools",
                "--tools",
                "fault",
                "--allow-tools",
                "--tool-choice",
                "required",
                "--max-tool-steps",
                "1",
                "Say hi through the tool",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "the model asked for tools again after 1 rounds of calls, the most one turn may have; "
        "these calls did not run; the model was asked to answer from the results without tools" in err
    )
    # The second call is shown with what the model was told instead of its result; it never reached the server.
    assert err.count("[tool call: fault/echo") == 2
    assert "[tool result (failed): Cove did not run 'echo': this turn has had 1 rounds of calls" in err
    assert calls_file.read_text().split() == ["echo"]


def test_the_message_is_saved_before_the_servers_start(home: Path) -> None:
    """The servers start once the turn has saved the person's message: one that cannot start (or a
    signal while they start) ends the turn with a sentence and loses nothing."""
    cove(home, "tools", "add", "bad", "--", str(home / "no-such-server"))
    done = cove(home, *CHAT, "--tools", "bad", "--allow-tools", "Keep this message")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "the tool server 'bad' could not start" in done.stderr
    listed = cove(home, "history", "list")
    conversation_id = listed.stdout.split()[0]
    messages = _messages(home, conversation_id)
    assert messages[0]["role"] == "user" and messages[0]["content"] == "Keep this message"
