"""An MCP server for the fault cases, written with the SDK's MCPServer (FastMCP in mcp 1.x).

Run as `python fault_server.py CALLS_FILE [http PORT]`: every tool call appends the tool's name
to CALLS_FILE first, so a test can prove which calls reached the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

CALLS = Path(sys.argv[1])
server = MCPServer("cove-fault-server")
WIRE = os.dup(1)  # the SDK moves stdout aside while it serves; this copy still reaches the client


def _called(name: str) -> None:
    with CALLS.open("a", encoding="utf-8") as calls:
        calls.write(name + "\n")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    _called("echo")
    return text


@server.tool(description="The server's environment, as JSON.")
def env() -> str:
    _called("env")
    return json.dumps(dict(os.environ))


@server.tool(description="Exit the process at once.")
def crash() -> str:
    _called("crash")
    os._exit(3)


@server.tool(description="Never answer.")
async def hang() -> str:
    _called("hang")
    await asyncio.sleep(3600)
    return "woke"


@server.tool(description="A result of `size` characters.")
def huge(size: int) -> str:
    _called("huge")
    return "x" * size


@server.tool(description="Write a line that is not JSON-RPC to stdout, then never answer.")
async def garbage() -> str:
    _called("garbage")
    os.write(WIRE, b"this is not JSON-RPC\n")
    await asyncio.sleep(3600)
    return "woke"


if __name__ == "__main__":
    print("fault server: started", file=sys.stderr, flush=True)
    if len(sys.argv) > 3 and sys.argv[2] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
