"""No process of a stdio tool server outlives its server, nor Cove: a server that forks and exits
normally, one that ignores SIGTERM and hangs, and `cove chat` ended by SIGTERM, SIGHUP or SIGINT
to its process group (as `timeout`, a logout and Ctrl-C do) or by SIGKILL while a call hangs. A
call that was sent and never came back is in the record and the history as interrupted.

The server is tests/app/mcp/lingering_server.py: it leaves a child in its group, one in a group
of its own and a daemon (setsid, second fork), and notes every pid. Liveness is read from /proc:
a zombie counts as gone. `cove chat` runs in a process of its own (a new session, so the test
can signal its group) with the scripted fake engine host replaying a call of `hang`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.mcp.approval import ToolRequest, allow_without_asking, decide
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits, ToolResult
from app.mcp.servers import ToolServer, stdio_server
from tests.app.mcp.conftest import MemoryRules
from tests.conftest import FAKE_HOST
from tests.support.cli import cove
from tests.support.paths import REPO_ROOT
from tests.support.tiny_model import write_tiny_gguf
from tests.support.tool_turns import QWEN_TEMPLATE

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SERVER = Path(__file__).with_name("lingering_server.py")
KINDS = ("server", "child", "group", "daemon")
WAIT_S = 30.0
HANG = '<tool_call>\n{"name": "hang", "arguments": {}}\n</tool_call>'
# `cove` with the scripted engine host; SIGINT is restored in case this test's own process was
# started with it ignored (a background job), as it is for a person's `cove` in a terminal.
FAKE_COVE = f"""
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from app.core import Core
real = Core.engine_client
Core.engine_client = lambda self, host_argv=None: real(self, [sys.executable, {str(FAKE_HOST)!r}])
from app.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _stat(pid: int) -> list[bytes] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _identity(pid: int) -> tuple[int, bytes] | None:
    fields = _stat(pid)
    return (pid, fields[19]) if fields else None  # the start time tells a reused pid apart


def _alive(identity: tuple[int, bytes]) -> bool:
    fields = _stat(identity[0])
    return fields is not None and fields[19] == identity[1] and fields[0] not in (b"Z", b"X")


def _descendants(root: int) -> set[tuple[int, bytes]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if (identity := _identity(child)) is not None and identity not in found:
                found.add(identity)
                todo.append(child)
    return found


def _noted(pids_file: Path) -> dict[str, tuple[int, bytes]]:
    """The server's and its three processes' identities, once all four have written theirs."""
    deadline = time.monotonic() + WAIT_S
    while True:
        lines = [line.split() for line in pids_file.read_text().splitlines()] if pids_file.exists() else []
        if {kind for kind, _pid in lines} == set(KINDS):
            noted = {kind: _identity(int(pid)) for kind, pid in lines}
            assert all(noted.values()), noted
            return noted  # type: ignore[return-value]
        assert time.monotonic() < deadline, lines
        time.sleep(0.05)


def _survivors(identities: set[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
    """Those still alive after up to WAIT_S (what is left is stopped, so no test leaves any)."""
    deadline = time.monotonic() + WAIT_S
    while (left := {i for i in identities if _alive(i)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid, _start in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _lingering(tmp_path: Path, mode: str) -> tuple[ToolServer, Path, Path]:
    pids, calls = tmp_path / "pids.txt", tmp_path / "calls.txt"
    return stdio_server("lingering", [sys.executable, str(SERVER), str(pids), str(calls), mode]), pids, calls


@pytest.fixture
def host(tmp_path: Path) -> Iterator[McpHost]:
    with McpHost(tmp_path / "logs" / "tool-servers.log", ToolLimits(call_timeout_s=1.5)) as started:
        yield started


def test_a_server_that_exits_normally_takes_every_process_it_started_with_it(host: McpHost, tmp_path: Path) -> None:
    server, pids, _calls = _lingering(tmp_path, "polite")
    assert [tool.name for tool in host.list_tools(server)] == ["hang", "echo"]
    noted = _noted(pids)
    host.stop("lingering")  # its input closes; it exits 0 at once
    assert _survivors(set(noted.values())) == set()
    assert "leash: the server exited; stopped 3 process(es) it left running" in (tmp_path / "logs" / "tool-servers.log").read_text()


def test_a_hung_server_that_ignores_sigterm_is_stopped_with_every_process_it_started(host: McpHost, tmp_path: Path) -> None:
    server, pids, calls = _lingering(tmp_path, "hostile")
    request = ToolRequest(server, "hang", {})
    results: list[ToolResult] = []
    calling = threading.Thread(target=lambda: results.append(host.call_tool(request, decide(request, allow_without_asking, MemoryRules()))))
    calling.start()
    noted = _noted(pids)  # while the call hangs
    calling.join(WAIT_S)
    assert results and results[0].status == "failed" and "got no answer within 1.5 seconds" in results[0].text
    assert calls.read_text().split() == ["hang"]
    assert _survivors(set(noted.values())) == set()


# ---- `cove chat` ended by a signal while a call hangs ---------------------------------------------


@pytest.fixture(scope="module")
def prepared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A COVE_HOME with the tiny model (Qwen 2.5's template, so Hermes calls) and the server added."""
    home = tmp_path_factory.mktemp("lifetime") / "home"
    model = write_tiny_gguf(home.parent / "qwentools.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096)
    done = cove(home, "models", "import", str(model))
    assert done.returncode == 0, done.stderr
    return home


@pytest.fixture
def chat(prepared_home: Path, tmp_path: Path) -> Iterator[tuple[Path, Path, Path, subprocess.Popen]]:
    """`cove chat --tools lingering --allow-tools` started, its call of `hang` reached the server."""
    home = tmp_path / "home"
    shutil.copytree(prepared_home, home)
    pids, calls = tmp_path / "pids.txt", tmp_path / "calls.txt"
    added = cove(home, "tools", "add", "lingering", "--", sys.executable, str(SERVER), str(pids), str(calls), "hostile")
    assert added.returncode == 0, added.stderr
    pieces = tmp_path / "pieces.json"
    pieces.write_text(json.dumps([HANG[i : i + 7] for i in range(0, len(HANG), 7)]))
    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "FAKE_HOST_PIECES": str(pieces)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FAKE_COVE,
            "chat",
            "--new",
            "--model",
            "qwentools",
            "--tools",
            "lingering",
            "--allow-tools",
            "What is taking so long?",
        ],
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "hang" not in (calls.read_text() if calls.exists() else ""):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the call never reached the server"
            time.sleep(0.1)
        yield home, pids, calls, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _everything_of(proc: subprocess.Popen, pids: Path) -> set[tuple[int, bytes]]:
    """Every process under `cove` now, and the server's own (its daemon is under no one's)."""
    return _descendants(proc.pid) | set(_noted(pids).values())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_to_cove_during_a_hanging_call_records_it_and_leaves_no_process(
    chat: tuple[Path, Path, Path, subprocess.Popen], sig: signal.Signals
) -> None:
    home, pids, _calls, proc = chat
    processes = _everything_of(proc, pids)
    os.killpg(proc.pid, sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert _survivors(processes) == set()

    exported = cove(home, "record", "export")
    assert exported.returncode == 0, exported.stderr
    entries = [json.loads(line) for line in exported.stdout.splitlines()]
    calls = [e for e in entries if e["endpoint"] == "tool:lingering/hang"]
    assert len(calls) == 1 and calls[0]["status"] == "interrupted", [(e["endpoint"], e["status"]) for e in entries]
    assert f"Cove was stopped ({sig.name})" in calls[0]["reply"] and "its result is unknown" in calls[0]["reply"]
    assert json.loads(calls[0]["params"])["decision"] == "once"

    shown = cove(home, "history", "show", calls[0]["conversation_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool_call", "tool", "assistant"]
    assert messages[2]["params"]["tool"] == "hang" and messages[3]["params"]["status"] == "interrupted"
    assert messages[3]["content"] == calls[0]["reply"]
    assert messages[4]["status"] == ("cancelled" if sig == signal.SIGINT else "interrupted")  # Ctrl-C: the person
    assert cove(home, "record", "verify").returncode == 0


def test_sigkill_of_cove_during_a_hanging_call_leaves_no_process(chat: tuple[Path, Path, Path, subprocess.Popen]) -> None:
    _home, pids, _calls, proc = chat
    processes = _everything_of(proc, pids)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _survivors(processes) == set()
