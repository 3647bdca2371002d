"""Servers no one here wrote: mcp-server-time (PyPI), the reference filesystem and everything
servers (npm, through this machine's npx), and the fault server over Streamable HTTP."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.mcp.approval import ToolRequest, allow_without_asking, decide
from app.mcp.host import McpHost
from app.mcp.results import ToolLimits, ToolResult
from app.mcp.servers import ToolServer, http_server, stdio_server
from tests.app.mcp.conftest import FAULT_SERVER, MemoryRules, calls

NPM_PACKAGES = ("@modelcontextprotocol/server-filesystem", "@modelcontextprotocol/server-everything")


def allowed_call(host: McpHost, server: ToolServer, tool: str, arguments: dict) -> ToolResult:
    request = ToolRequest(server, tool, arguments)
    return host.call_tool(request, decide(request, allow_without_asking, MemoryRules()))


@pytest.fixture(scope="module")
def npx() -> str:
    """npx, with both reference servers fetched into its cache (a first fetch takes a while)."""
    found = shutil.which("npx")
    assert found, "these tests need node's npx on PATH (the reference MCP servers are npm packages)"
    for package in NPM_PACKAGES:
        try:
            done = subprocess.run([found, "-y", package, "/"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.fail(f"npx could not fetch {package} within 10 minutes: is the npm registry reachable?")
        if done.returncode != 0 and "running on stdio" not in done.stderr.lower() and "server" not in done.stderr.lower():
            pytest.fail(f"npx could not fetch {package} from the npm registry (is it reachable?): {done.stderr[-500:]}")
    return found


@pytest.fixture
def slow_host(log_file: Path) -> Iterator[McpHost]:
    with McpHost(log_file, ToolLimits(call_timeout_s=120, result_cap_chars=20_000)) as started:
        yield started


def test_mcp_server_time_tells_the_time_in_a_named_zone(host: McpHost) -> None:
    server = stdio_server("time", [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])
    assert {tool.name for tool in host.list_tools(server)} == {"get_current_time", "convert_time"}
    result = allowed_call(host, server, "get_current_time", {"timezone": "Asia/Tokyo"})
    answer = json.loads(result.text)
    assert result.status == "ok"
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")


def test_the_reference_filesystem_server_lists_a_folder(slow_host: McpHost, npx: str, tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    (folder / "inside").mkdir()
    server = stdio_server("files", [npx, "-y", NPM_PACKAGES[0], str(folder)])
    assert "list_directory" in {tool.name for tool in slow_host.list_tools(server)}
    result = allowed_call(slow_host, server, "list_directory", {"path": str(folder)})
    assert result.status == "ok"
    assert "[FILE] notes.txt" in result.text and "[DIR] inside" in result.text
    outside = allowed_call(slow_host, server, "list_directory", {"path": "/"})
    assert outside.status == "tool_error"  # the server refuses what lies outside the folder it was given


def test_the_reference_everything_server_echoes(slow_host: McpHost, npx: str) -> None:
    server = stdio_server("everything", [npx, "-y", NPM_PACKAGES[1]])
    tools = {tool.name: tool.description for tool in slow_host.list_tools(server)}
    assert "echo" in tools and tools["echo"]
    result = allowed_call(slow_host, server, "echo", {"message": "hello from Cove"})
    assert result.status == "ok" and "hello from Cove" in result.text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_fault_server(calls_file: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FAULT_SERVER), str(calls_file), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(300):  # until it listens (polled, not timed)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP fault server exited"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_streamable_http_server_on_this_machine(quick_host: McpHost, http_fault_server: str, calls_file: Path) -> None:
    host = quick_host
    server = http_server("local", http_fault_server)
    assert "echo" in {tool.name for tool in host.list_tools(server)}
    assert allowed_call(host, server, "echo", {"text": "over http"}).text == "over http"
    crashed = allowed_call(host, server, "crash", {})  # the whole HTTP server exits
    assert crashed.status == "failed" and "the tool server 'local'" in crashed.text
    assert calls(calls_file) == ["echo", "crash"]


def test_an_http_server_that_is_not_there_is_one_sentence(host: McpHost) -> None:
    server = http_server("gone", f"http://127.0.0.1:{free_port()}/mcp")
    result = allowed_call(host, server, "echo", {})
    assert result.status == "failed" and result.text.startswith("the tool server 'gone'")
    assert "\n" not in result.text
