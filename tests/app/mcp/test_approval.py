"""The consent gate, enforced where the call is made: no decision, no call; a denial never
reaches the server; "always" is bound to the exact command line and can be revoked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.core import open_core
from app.mcp.approval import ALLOW_ONCE, ALWAYS, DENY, ApprovalRequired, Decision, ToolRequest, decide
from app.mcp.host import McpHost
from app.mcp.record import record_tool_call
from app.mcp.servers import ToolServer, stdio_server
from app.mcp.store import ToolServerStore, UnknownToolServer
from app.paths import resolve_paths
from app.store.request_log import RequestLog
from tests.app.mcp.conftest import Approver, MemoryRules, calls


def test_no_decision_no_call(host: McpHost, fault_server: ToolServer, calls_file: Path) -> None:
    with pytest.raises(ApprovalRequired, match="has no decision of the person's"):
        host.call_tool(ToolRequest(fault_server, "echo", {"text": "x"}), None)
    assert calls(calls_file) == []


def test_a_decision_cannot_be_made_outside_the_gate() -> None:
    with pytest.raises(ApprovalRequired):
        Decision("key", ALLOW_ONCE, "someone")


def test_a_decision_covers_only_its_own_call(host: McpHost, fault_server: ToolServer, calls_file: Path) -> None:
    asked = ToolRequest(fault_server, "echo", {"text": "harmless"})
    decision = decide(asked, Approver(ALLOW_ONCE), MemoryRules())
    with pytest.raises(ApprovalRequired):
        host.call_tool(ToolRequest(fault_server, "echo", {"text": "something else"}), decision)
    with pytest.raises(ApprovalRequired):
        host.call_tool(ToolRequest(fault_server, "crash", {}), decision)
    assert calls(calls_file) == []


def test_deny_gives_a_denial_and_the_server_never_sees_the_call(host: McpHost, fault_server: ToolServer, calls_file: Path) -> None:
    request = ToolRequest(fault_server, "echo", {"text": "x"})
    result = host.call_tool(request, decide(request, Approver(DENY), MemoryRules()))
    assert result.status == "denied"
    assert result.text == "The person denied this call of the tool 'echo' on the server 'fault'; it did not run."
    allowed = ToolRequest(fault_server, "echo", {"text": "y"})
    assert host.call_tool(allowed, decide(allowed, Approver(ALLOW_ONCE), MemoryRules())).text == "y"
    assert calls(calls_file) == ["echo"]  # only the allowed one


def test_a_question_that_fails_or_an_unknown_answer_denies(fault_server: ToolServer) -> None:
    def closed(_request: ToolRequest) -> str:
        raise RuntimeError("the dialog was closed")

    request = ToolRequest(fault_server, "echo", {})
    assert decide(request, closed, MemoryRules()).verdict == DENY
    assert decide(request, Approver(""), MemoryRules()).verdict == DENY


def test_always_is_kept_per_tool_and_bound_to_the_command_line(fault_server: ToolServer) -> None:
    rules, approver = MemoryRules(), Approver(ALWAYS)
    first = decide(ToolRequest(fault_server, "echo", {"text": "a"}), approver, rules)
    approver.answer = DENY
    second = decide(ToolRequest(fault_server, "echo", {"text": "b"}), approver, rules)
    assert (first.verdict, second.verdict, len(approver.asked)) == (ALWAYS, ALWAYS, 1)
    assert "always allowed" in second.approved_by
    assert decide(ToolRequest(fault_server, "env", {}), approver, rules).verdict == DENY  # another tool: asked
    changed = stdio_server("fault", [*fault_server.command, "--different"])
    assert decide(ToolRequest(changed, "echo", {}), approver, rules).verdict == DENY  # a changed command: asked
    assert len(approver.asked) == 3


def open_store(tmp_path: Path):
    return open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))


def test_the_store_keeps_servers_and_rules_bound_to_the_identity(tmp_path: Path, fault_server: ToolServer) -> None:
    core = open_store(tmp_path)
    try:
        store = ToolServerStore(core.db)
        store.add(fault_server)
        assert store.get("fault") == fault_server
        with pytest.raises(ValueError, match="exists already"):
            store.add(fault_server)
        store.remember(fault_server, "echo")
        assert store.allows(fault_server, "echo") and store.rules(fault_server) == ["echo"]
        moved = stdio_server("fault", ["other-program"])
        assert not store.allows(moved, "echo")
        assert store.revoke("fault", "echo") == 1
        assert not store.allows(fault_server, "echo")
        store.remove("fault")
        with pytest.raises(UnknownToolServer, match="there is no tool server named 'fault'"):
            store.get("fault")
    finally:
        core.close()


def test_each_call_is_a_sealed_entry_of_the_record(tmp_path: Path, host: McpHost, fault_server: ToolServer) -> None:
    core = open_store(tmp_path)
    try:
        allowed = ToolRequest(fault_server, "echo", {"text": "hello"})
        decision = decide(allowed, Approver(ALLOW_ONCE), ToolServerStore(core.db))
        seq = record_tool_call(core.db, allowed, decision, host.call_tool(allowed, decision))
        denied = ToolRequest(fault_server, "crash", {})
        no = decide(denied, Approver(DENY), ToolServerStore(core.db))
        record_tool_call(core.db, denied, no, host.call_tool(denied, no))
        log = RequestLog(core.db)
        entries = log.entries()
        assert [e["endpoint"] for e in entries] == ["tool:fault/echo", "tool:fault/crash"]
        assert entries[0]["seq"] == seq and entries[0]["reply"] == "hello" and entries[0]["status"] == "ok"
        params = json.loads(entries[0]["params"])
        assert params["approved_by"] == "the person (allowed once)"
        assert params["arguments"] == {"text": "hello"}
        assert params["server_identity"] == fault_server.identity
        assert params["result_sha256"] == hashlib.sha256(b"hello").hexdigest()
        assert entries[1]["status"] == "denied" and json.loads(entries[1]["params"])["approved_by"] == "the person (denied)"
        assert log.verify().intact
    finally:
        core.close()


def test_a_rule_whose_kept_files_cannot_be_read_asks_again_with_a_sentence(tmp_path: Path, fault_server: ToolServer) -> None:
    core = open_store(tmp_path)
    try:
        store = ToolServerStore(core.db)
        store.add(fault_server)
        store.remember(fault_server, "echo")
        assert store.allows(fault_server, "echo")
        core.db.conn.execute("UPDATE tool_rules SET what_runs = '{not json' WHERE server = 'fault'")
        approver = Approver(DENY)
        assert decide(ToolRequest(fault_server, "echo", {}), approver, store).verdict == DENY
        assert approver.asked[0].asked_again == (
            'You chose "always" for this tool before, but what it was kept for cannot be read back, so it asks again.'
        )
    finally:
        core.close()
