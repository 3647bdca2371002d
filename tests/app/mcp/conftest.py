"""Fixtures for the tool-server tests: the fault server, a host with short limits, rules in memory."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.mcp.approval import ToolRequest
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.servers import ToolServer, stdio_server

FAULT_SERVER = Path(__file__).with_name("fault_server.py")


class MemoryRules:
    """The AlwaysRules protocol in memory, bound to the server's identity like the store's."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], str] = {}

    def allows(self, server: ToolServer, tool: str) -> bool:
        return self.kept.get((server.name, tool)) == server.identity

    def remember(self, server: ToolServer, tool: str) -> None:
        self.kept[(server.name, tool)] = server.identity


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    path = tmp_path / "calls.txt"
    path.write_text("")
    return path


@pytest.fixture
def fault_server(calls_file: Path) -> ToolServer:
    return stdio_server("fault", [sys.executable, str(FAULT_SERVER), str(calls_file)])


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "tool-servers.log"


@pytest.fixture
def host(log_file: Path) -> Iterator[McpHost]:
    with McpHost(log_file, ToolLimits(call_timeout_s=20, result_cap_chars=1000)) as started:
        yield started


@pytest.fixture
def quick_host(log_file: Path) -> Iterator[McpHost]:
    """A short call timeout (the setting), for the hang and garbage cases."""
    with McpHost(log_file, ToolLimits(call_timeout_s=1.5, result_cap_chars=1000)) as started:
        yield started


def calls(path: Path) -> list[str]:
    return path.read_text().split()


class Approver:
    """An approver that gives one answer and keeps the requests it was asked about."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[ToolRequest] = []

    def __call__(self, request: ToolRequest) -> str:
        self.asked.append(request)
        return self.answer
