"""Fixtures of the tool-loop tests: the fault MCP server (tests/app/mcp/fault_server.py) with the
file it writes each call's name to, a host to run it, and the fake engine host's scripted replies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.mcp.host import McpHost
from app.mcp.results import ToolLimits
from app.mcp.servers import ToolServer
from tests.app.mcp.conftest import calls_file, fault_server  # noqa: F401 - fixtures shared with the MCP tests


@pytest.fixture
def server(fault_server: ToolServer) -> ToolServer:  # noqa: F811 - the imported fixture, by name
    return fault_server


@pytest.fixture
def host(tmp_path: Path) -> Iterator[McpHost]:
    with McpHost(tmp_path / "logs" / "tool-servers.log", ToolLimits(call_timeout_s=20, result_cap_chars=1000)) as h:
        yield h


@pytest.fixture
def pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the fake engine host reads each reply's pieces from (FAKE_HOST_PIECES)."""
    path = tmp_path / "pieces.json"
    path.write_text("[]")
    monkeypatch.setenv("FAKE_HOST_PIECES", str(path))
    return path
