"""Small real MCP servers (the SDK's MCPServer, FastMCP in mcp 1.x) for the tests of which server a
call reaches: `server_source` is a whole script that offers the tools it is given, each noting
"LABEL TOOL" in a calls file and answering "LABEL ran TOOL"; tests write it where they need it
(two folders, each with its own srv.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

_SOURCE = '''"""A tool server written by a test: {label}."""
from pathlib import Path

from mcp.server.mcpserver import MCPServer

LABEL, CALLS = {label!r}, Path({calls!r})
server = MCPServer("cove-test-" + LABEL)


def _tool(name):
    def run() -> str:
        with CALLS.open("a", encoding="utf-8") as calls:
            calls.write(LABEL + " " + name + "\\n")
        return LABEL + " ran " + name

    server.add_tool(run, name=name, description=LABEL + "'s tool " + name + ".")


for _name in {tools!r}:
    _tool(_name)

if __name__ == "__main__":
    server.run()
'''


def server_source(label: str, calls: Path, tools: Sequence[str]) -> str:
    return _SOURCE.format(label=label, calls=str(calls), tools=list(tools))


def write_server(path: Path, label: str, calls: Path, tools: Sequence[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(server_source(label, calls, tools), encoding="utf-8")
    return path


def calls_made(calls: Path) -> list[str]:
    """Each call that reached a server, as "LABEL TOOL"."""
    return calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
