"""A server that crashes, hangs, answers too much or writes garbage: one sentence each, and
the next call works again; its stderr goes to the log; its environment is scrubbed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.mcp.approval import ToolRequest, allow_without_asking, decide
from app.mcp.failures import ToolServerError
from app.mcp.host import McpHost
from app.mcp.results import ToolResult
from app.mcp.servers import ToolServer, stdio_server
from tests.app.mcp.conftest import MemoryRules, calls


def allowed_call(host: McpHost, server: ToolServer, tool: str, arguments: dict | None = None) -> ToolResult:
    request = ToolRequest(server, tool, arguments or {})
    return host.call_tool(request, decide(request, allow_without_asking, MemoryRules()))


def test_lists_the_fault_servers_tools_with_descriptions(host: McpHost, fault_server: ToolServer) -> None:
    tools = {tool.name: tool.description for tool in host.list_tools(fault_server)}
    assert set(tools) == {"echo", "env", "crash", "hang", "huge", "garbage"}
    assert tools["echo"] == "Echo the text back."


def test_a_crash_is_one_sentence_and_the_next_call_starts_the_server_again(
    host: McpHost, fault_server: ToolServer, calls_file: Path
) -> None:
    result = allowed_call(host, fault_server, "crash")
    assert result.status == "failed"
    assert result.text == "the tool server 'fault' stopped during the call of 'crash'; it will be started again for the next call."
    again = allowed_call(host, fault_server, "echo", {"text": "still here"})
    assert (again.status, again.text) == ("ok", "still here")
    assert calls(calls_file) == ["crash", "echo"]


def test_a_hang_ends_at_the_timeout_setting(quick_host: McpHost, fault_server: ToolServer) -> None:
    result = allowed_call(quick_host, fault_server, "hang")
    assert result.status == "failed"
    assert result.text == (
        "the call of 'hang' on the tool server 'fault' got no answer within 1.5 seconds (the timeout setting); the server was stopped."
    )
    assert allowed_call(quick_host, fault_server, "echo", {"text": "back"}).text == "back"


def test_output_that_is_not_mcp_is_one_sentence(quick_host: McpHost, fault_server: ToolServer, log_file: Path) -> None:
    result = allowed_call(quick_host, fault_server, "garbage")
    assert result.status == "failed"
    assert result.text == "the tool server 'fault' wrote output that is not MCP and gave no answer; it was stopped."
    assert "this is not JSON-RPC" in log_file.read_text()


def test_a_huge_result_is_cut_and_the_model_is_told(host: McpHost, fault_server: ToolServer) -> None:
    result = allowed_call(host, fault_server, "huge", {"size": 50_000})
    assert result.status == "ok"
    assert result.cut_from == 50_000
    assert result.text.startswith("x" * 1000 + "\n[cut by Cove: the tool's result was 50000 characters; only the first 1000")
    assert len(result.text) < 1200


def test_a_result_under_the_cap_is_whole(host: McpHost, fault_server: ToolServer) -> None:
    result = allowed_call(host, fault_server, "huge", {"size": 1000})
    assert (result.text, result.cut_from) == ("x" * 1000, None)


def test_a_server_that_cannot_start_is_one_sentence(host: McpHost, tmp_path: Path) -> None:
    missing = stdio_server("missing", [str(tmp_path / "no-such-program"), "--flag"])
    with pytest.raises(ToolServerError) as caught:
        host.list_tools(missing)
    assert str(caught.value) == f"the tool server 'missing' could not start: '{tmp_path / 'no-such-program'}' was not found."
    result = allowed_call(host, missing, "anything")
    assert (result.status, result.text) == ("failed", str(caught.value))


def test_a_server_that_exits_at_once_is_one_sentence(host: McpHost) -> None:
    quits = stdio_server("quits", ["false"])
    with pytest.raises(ToolServerError, match="^the tool server 'quits' stopped while it was starting"):
        host.list_tools(quits)


def test_stderr_goes_to_the_log_not_the_screen(
    host: McpHost, fault_server: ToolServer, log_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    host.list_tools(fault_server)
    host.stop_all()
    assert "fault server: started" in log_file.read_text()
    assert "fault server" not in capfd.readouterr().err


def test_the_environment_is_scrubbed(host: McpHost, fault_server: ToolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "COVE_API_KEY", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "secret-value")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = json.loads(allowed_call(host, fault_server, "env").text)
    assert "secret-value" not in json.dumps(env)
    assert env["LANG"] == "C.UTF-8"
    assert "PATH" in env
    assert not [name for name in env if name.startswith("COVE")]


def test_a_changed_definition_restarts_the_server(host: McpHost, fault_server: ToolServer, calls_file: Path) -> None:
    assert allowed_call(host, fault_server, "echo", {"text": "one"}).text == "one"
    other = stdio_server("fault", [*fault_server.command, "extra"])
    assert allowed_call(host, other, "echo", {"text": "two"}).text == "two"


def test_close_stops_every_server(log_file: Path, fault_server: ToolServer) -> None:
    host = McpHost(log_file)
    host.list_tools(fault_server)
    host.close()
    host.close()
    assert log_file.read_text().rstrip().endswith("[cove: tool server fault] stopped")
    with pytest.raises(ToolServerError, match="Cove is stopping"):
        host.list_tools(fault_server)
