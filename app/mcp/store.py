"""Tool servers the person added and the "always allow" rules, in the history database.

Runs on the thread that owns the database connection, never on the MCP host's thread.
"""

from __future__ import annotations

import json

import sqlite_utils

from app.mcp.identity import WhatRuns, what_changed, what_runs
from app.mcp.servers import ToolServer, stdio_server
from models.timestamps import utc_timestamp
from models.transactions import write_transaction


class UnknownToolServer(LookupError):
    """No tool server of that name (one sentence)."""


class ToolServerStore:
    """Also the AlwaysRules of app/mcp/approval.py."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def add(self, server: ToolServer) -> ToolServer:
        """Keep `server`, its program and script resolved to absolute paths (as `stdio_server`
        does); returns it as kept."""
        if self.find(server.name) is not None:
            raise ValueError(f"a tool server named '{server.name}' exists already (cove tools remove {server.name} first).")
        if server.command:
            server = stdio_server(server.name, server.command)
        with write_transaction(self.db):
            self.db.table("tool_servers").insert(
                {
                    "name": server.name,
                    "command": json.dumps(list(server.command)) if server.command else None,
                    "url": server.url,
                    "added_at": utc_timestamp(),
                }
            )
        return server

    def remove(self, name: str) -> None:
        self.get(name)
        with write_transaction(self.db):
            self.db.conn.execute("DELETE FROM tool_rules WHERE server = ?", [name])
            self.db.conn.execute("DELETE FROM tool_servers WHERE name = ?", [name])

    def find(self, name: str) -> ToolServer | None:
        row = next(self.db.query("SELECT * FROM tool_servers WHERE name = ?", [name]), None)
        return _server(row) if row else None

    def get(self, name: str) -> ToolServer:
        server = self.find(name)
        if server is None:
            known = ", ".join(s.name for s in self.all()) or "none yet"
            raise UnknownToolServer(f"there is no tool server named '{name}' (added: {known}).")
        return server

    def all(self) -> list[ToolServer]:
        return [_server(row) for row in self.db.query("SELECT * FROM tool_servers ORDER BY name")]

    # -- "always allow" rules: bound to the exact command line or URL and to what it runs --------

    def allows(self, server: ToolServer, tool: str) -> bool:
        row = self._rule(server, tool)
        return row is not None and _mismatch(row, server, what_runs(server.command, server.url)) is None

    def asked_again(self, server: ToolServer, tool: str) -> str | None:
        """Why a rule kept for this tool no longer allows it (one sentence), or None: there is
        none, or it still applies."""
        row = self._rule(server, tool)
        return None if row is None else _mismatch(row, server, what_runs(server.command, server.url))

    def remember(self, server: ToolServer, tool: str) -> None:
        """Keep "always" for `tool`, tied to the command line or URL and to what it runs now."""
        runs_now = what_runs(server.command, server.url)
        with write_transaction(self.db):
            self.db.table("tool_rules").upsert(
                {
                    "server": server.name,
                    "tool": tool,
                    "identity": server.identity,
                    "what_runs": runs_now.to_json(),
                    "created_at": utc_timestamp(),
                },
                pk=("server", "tool"),
            )

    def revoke(self, server_name: str, tool: str | None = None) -> int:
        """Forget the rules of one tool, or of every tool of the server; returns how many."""
        with write_transaction(self.db):
            if tool is None:
                cursor = self.db.conn.execute("DELETE FROM tool_rules WHERE server = ?", [server_name])
            else:
                cursor = self.db.conn.execute("DELETE FROM tool_rules WHERE server = ? AND tool = ?", [server_name, tool])
        return int(cursor.rowcount)

    def rules(self, server: ToolServer) -> list[str]:
        """The tools always allowed on this server as it is now defined and runs now."""
        rows = list(self.db.query("SELECT * FROM tool_rules WHERE server = ? ORDER BY tool", [server.name]))
        runs_now = what_runs(server.command, server.url) if rows else None
        return [row["tool"] for row in rows if runs_now is not None and _mismatch(row, server, runs_now) is None]

    def _rule(self, server: ToolServer, tool: str) -> dict | None:
        return next(self.db.query("SELECT * FROM tool_rules WHERE server = ? AND tool = ?", [server.name, tool]), None)


def _mismatch(row: dict, server: ToolServer, now: WhatRuns) -> str | None:
    """Why the rule in `row` does not allow a call of `server` that would run `now`, or None."""
    if row["identity"] != server.identity:
        return f"its command line or URL has changed since (it was: {row['identity']})"
    if not row.get("what_runs"):
        return 'that was before Cove tied "always" to the program and script a server runs, so it asks once again'
    kept = WhatRuns.from_json(row["what_runs"])
    if kept is None:
        return "what it was kept for cannot be read back, so it asks again"
    return what_changed(kept, now, server.command)


def _server(row: dict) -> ToolServer:
    command = tuple(json.loads(row["command"])) if row["command"] else ()
    return ToolServer(name=row["name"], command=command, url=row["url"] or None)
