"""Tool servers the person added and the "always allow" rules, in the history database.

Runs on the thread that owns the database connection, never on the MCP host's thread.
"""

from __future__ import annotations

import json

import sqlite_utils

from app.mcp.servers import ToolServer
from models.timestamps import utc_timestamp
from models.transactions import write_transaction


class UnknownToolServer(LookupError):
    """No tool server of that name (one sentence)."""


class ToolServerStore:
    """Also the AlwaysRules of app/mcp/approval.py."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def add(self, server: ToolServer) -> None:
        if self.find(server.name) is not None:
            raise ValueError(f"a tool server named '{server.name}' exists already (cove tools remove {server.name} first).")
        with write_transaction(self.db):
            self.db.table("tool_servers").insert({
                "name": server.name, "command": json.dumps(list(server.command)) if server.command else None,
                "url": server.url, "added_at": utc_timestamp()})

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

    # -- "always allow" rules, bound to the server's exact command line or URL ----------------

    def allows(self, server: ToolServer, tool: str) -> bool:
        row = next(self.db.query("SELECT identity FROM tool_rules WHERE server = ? AND tool = ?", [server.name, tool]), None)
        return row is not None and row["identity"] == server.identity

    def remember(self, server: ToolServer, tool: str) -> None:
        with write_transaction(self.db):
            self.db.table("tool_rules").upsert(
                {"server": server.name, "tool": tool, "identity": server.identity, "created_at": utc_timestamp()},
                pk=("server", "tool"))

    def revoke(self, server_name: str, tool: str | None = None) -> int:
        """Forget the rules of one tool, or of every tool of the server; returns how many."""
        with write_transaction(self.db):
            if tool is None:
                cursor = self.db.conn.execute("DELETE FROM tool_rules WHERE server = ?", [server_name])
            else:
                cursor = self.db.conn.execute("DELETE FROM tool_rules WHERE server = ? AND tool = ?", [server_name, tool])
        return int(cursor.rowcount)

    def rules(self, server: ToolServer) -> list[str]:
        """The tools always allowed on this server as it is now defined."""
        rows = self.db.query("SELECT tool, identity FROM tool_rules WHERE server = ? ORDER BY tool", [server.name])
        return [row["tool"] for row in rows if row["identity"] == server.identity]


def _server(row: dict) -> ToolServer:
    command = tuple(json.loads(row["command"])) if row["command"] else ()
    return ToolServer(name=row["name"], command=command, url=row["url"] or None)
