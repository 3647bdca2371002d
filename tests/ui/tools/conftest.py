"""The Tools page's fixtures: the page on the test core's store, with an MCP host made only when
a Test asks for one (so a test can prove nothing was started), and the questions it asked."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.store import ToolServerStore
from tests.app.mcp.conftest import FAULT_SERVER
from ui.tools.page import ToolsPage

WAIT_MS = 60_000


class Hosts:
    """The page's McpHost factory: counts the hosts it made; closes them at the end."""

    def __init__(self, log_file: Path) -> None:
        self.log_file = log_file
        self.made: list[McpHost] = []

    def __call__(self) -> McpHost:
        host = McpHost(self.log_file, ToolLimits(call_timeout_s=20, result_cap_chars=1000))
        self.made.append(host)
        return host


class Questions:
    """The page's confirm(): answers `answer` and keeps what it was asked."""

    def __init__(self) -> None:
        self.answer = False
        self.asked: list[tuple[str, str]] = []

    def __call__(self, title: str, question: str) -> bool:
        self.asked.append((title, question))
        return self.answer


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    made = Hosts(tmp_path / "logs" / "tool-servers.log")
    yield made
    for host in made.made:
        host.close()


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    """Where the fault server writes the name of each tool called (none, when only listed)."""
    path = tmp_path / "calls.txt"
    path.write_text("")
    return path


@pytest.fixture
def questions() -> Questions:
    return Questions()


@pytest.fixture
def page(qtbot, cove_core, hosts: Hosts, questions: Questions) -> ToolsPage:
    shown = ToolsPage(ToolServerStore(cove_core.db), cove_core.network, hosts, confirm=questions)
    qtbot.addWidget(shown)
    shown.resize(900, 560)
    shown.show()
    return shown


def fault_command(calls_file: Path) -> list[str]:
    return [sys.executable, str(FAULT_SERVER), str(calls_file)]


def time_command() -> list[str]:
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def children_running(marker: str) -> list[psutil.Process]:
    """This process's children (and theirs) whose command line mentions `marker`."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(marker in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found
