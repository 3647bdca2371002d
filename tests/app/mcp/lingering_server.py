"""A stdio MCP server (bare JSON-RPC lines, no SDK) that leaves processes behind, for the
lifetime tests (test_server_lifetime.py).

Run as `python lingering_server.py PIDS CALLS polite|hostile`. Before it serves it forks three
processes that sleep for an hour: `child` stays in its process group, `group` moves to a group
of its own in the same session, `daemon` calls setsid and forks again (its parent exits), so it
is in neither. Each writes "KIND PID" to PIDS, as the server does ("server PID"). Every tool call
appends the tool's name to CALLS first. `hostile`: the server and all three ignore SIGTERM,
SIGHUP and SIGINT. The tool `hang` blocks the whole server: it reads nothing more, so the end of
its input goes unseen. At the end of its input the server exits 0 and leaves the three running.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PIDS, CALLS, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
TOOLS = [
    {"name": "hang", "description": "Never answers.", "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False}},
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
]


def note(kind: str) -> None:
    with open(PIDS, "a", encoding="utf-8") as pids:
        pids.write(f"{kind} {os.getpid()}\n")


def harden() -> None:
    if MODE == "hostile":
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)


def linger(kind: str) -> None:
    if os.fork() != 0:
        return
    try:
        if kind == "group":
            os.setpgid(0, 0)
        elif kind == "daemon":
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        harden()
        note(kind)
        time.sleep(3600)
    finally:
        os._exit(0)


def reply(message: dict, result: dict | None = None, error: dict | None = None) -> None:
    answer = {"jsonrpc": "2.0", "id": message["id"], **({"error": error} if error else {"result": result})}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def serve() -> None:
    while line := sys.stdin.readline():
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        method = message.get("method")
        if method == "initialize":
            reply(
                message,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "lingering", "version": "1"},
                },
            )
        elif method == "tools/list":
            reply(message, {"tools": TOOLS})
        elif method == "tools/call":
            name = message["params"]["name"]
            with open(CALLS, "a", encoding="utf-8") as calls:
                calls.write(name + "\n")
            while name == "hang":
                time.sleep(3600)
            reply(message, {"content": [{"type": "text", "text": message["params"]["arguments"].get("text", "")}]})
        elif method == "ping":
            reply(message, {})
        else:
            reply(message, error={"code": -32601, "message": f"no method {method}"})


if __name__ == "__main__":
    harden()
    note("server")
    for kind in ("child", "group", "daemon"):
        linger(kind)
    serve()
