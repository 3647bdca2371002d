"""`cove tools`: add, list (read live), call and remove the person's own tool servers (MCP),
and revoke "always allow" rules. `add` stores the exact command line and starts nothing.

Everything a server wrote (its tools' names and descriptions, results, error sentences) reaches
the terminal through the terminal-text rule (app/cli/terminal_text.py): shown, never obeyed, on
a terminal; exact in a pipe or a file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from app.cli.terminal_text import for_terminal, json_for_terminal, say
from app.mcp.approval import ALLOW_ONCE, ALWAYS, DENY, ToolRequest, allow_without_asking, decide
from app.mcp.failures import ToolServerError, interrupted
from app.mcp.host import McpHost
from app.mcp.record import record_tool_call
from app.mcp.results import DEFAULT_CALL_TIMEOUT, DEFAULT_RESULT_CAP, ToolLimits
from app.mcp.servers import ToolServer, http_server, stdio_server
from app.mcp.store import ToolServerStore

if TYPE_CHECKING:
    from app.core import Core

NETWORK_NOTE = "Cove cannot see what this server does on the network (the network indicator does not cover it)."
LOG_NAME = "tool-servers.log"


class ToolsError(Exception):
    """A refusal of `cove tools`, as one sentence."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tools",
        help="your own tool servers (MCP): add, list their tools, call one, remove",
        description="Tool servers are programs you choose (started with a scrubbed environment) "
        "or Streamable HTTP servers on this machine. Every call is asked first.",
    )
    tsub = p.add_subparsers(dest="tools_command", metavar="COMMAND", required=True)

    add = tsub.add_parser("add", help="add a server: NAME -- COMMAND [ARGS...], or NAME --url URL (starts nothing)")
    add.add_argument("name")
    add.add_argument("--url", help="a Streamable HTTP server, e.g. http://127.0.0.1:8000/mcp")
    add.add_argument("--allow-remote", action="store_true", help="accept a URL that is not on this machine")
    add.add_argument("command", nargs="*", help="after --: the command and its arguments, exactly as they will run")
    add.set_defaults(run=_add)

    lst = tsub.add_parser("list", help="each server with the tools it offers (starts the servers to ask them)")
    _limits_options(lst)
    lst.add_argument("--allow-offline-once", action="store_true", help="start tool servers this once while offline")
    lst.set_defaults(run=_list)

    call = tsub.add_parser("call", help="call a tool: NAME TOOL '{json arguments}' (asked first)")
    call.add_argument("name")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", default="{}", help="a JSON object (default: {})")
    call.add_argument("--allow-tools", action="store_true", help="run without asking (for scripts)")
    call.add_argument("--allow-offline-once", action="store_true", help="start the server this once while offline")
    _limits_options(call)
    call.set_defaults(run=_call)

    rm = tsub.add_parser("remove", help="remove a server and its always-allow rules")
    rm.add_argument("name")
    rm.set_defaults(run=_remove)

    limits = tsub.add_parser(
        "limits",
        help="how long a tool call may take and how much of its result the model "
        "gets, for the window and cove chat: shown, or changed with the options",
    )
    limits.add_argument("--timeout", type=int, metavar="SECONDS", help="seconds a server may take to start or answer")
    limits.add_argument("--max-result", type=int, metavar="CHARS", help="characters of a result the model is given")
    limits.set_defaults(run=_limits)

    revoke = tsub.add_parser("revoke", help="forget 'always allow' for one tool of a server, or all of them")
    revoke.add_argument("name")
    revoke.add_argument("tool", nargs="?")
    revoke.set_defaults(run=_revoke)


def _limits_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a server may take to start or answer a call (default: the setting, "
        f"`cove tools limits`; {DEFAULT_CALL_TIMEOUT:g} unless changed)",
    )
    p.add_argument(
        "--max-result",
        type=int,
        default=None,
        metavar="CHARS",
        help=f"results longer than this are cut, and the cut is said (default: the setting; {DEFAULT_RESULT_CAP} unless changed)",
    )


def _limits(core: Core, args: argparse.Namespace) -> int:
    kept = core.tool_limits()
    if args.timeout is not None or args.max_result is not None:
        timeout = int(kept.call_timeout_s) if args.timeout is None else args.timeout
        chars = kept.result_cap_chars if args.max_result is None else args.max_result
        if timeout <= 0 or chars <= 0:
            raise ToolsError("--timeout and --max-result must be more than zero.")
        core.save_tool_limits(timeout, chars)
        kept = core.tool_limits()
    print(
        f"A tool call may take {kept.call_timeout_s:g} s (to start its server and answer); a result longer "
        f"than {kept.result_cap_chars:,} characters is cut, and the model is told."
    )
    return 0


def _add(core: Core, args: argparse.Namespace) -> int:
    if args.url and args.command:
        raise ToolsError("give either --url URL or -- COMMAND [ARGS...], not both.")
    server = http_server(args.name, args.url, allow_remote=args.allow_remote) if args.url else stdio_server(args.name, args.command)
    server = ToolServerStore(core.db).add(server)  # as kept: its program and script as absolute paths
    if server.url:
        say(f"Added the tool server '{server.name}' at {server.url}. Nothing was contacted.", sys.stdout)
    else:
        say(
            f"Added the tool server '{server.name}'. When its tools are listed or called, Cove will run "
            f"exactly this command line:\n  {server.identity}\nNothing was started.",
            sys.stdout,
        )
    print(NETWORK_NOTE)
    return 0


def _remove(core: Core, args: argparse.Namespace) -> int:
    ToolServerStore(core.db).remove(args.name)
    say(f"Removed the tool server '{args.name}' and its always-allow rules.", sys.stdout)
    return 0


def _revoke(core: Core, args: argparse.Namespace) -> int:
    store = ToolServerStore(core.db)
    store.get(args.name)
    count = store.revoke(args.name, args.tool)
    what = f"'{args.tool}'" if args.tool else "its tools"
    say(f"Forgot {count} always-allow rule(s) for {what} on '{args.name}': they will be asked again.", sys.stdout)
    return 0


def _list(core: Core, args: argparse.Namespace) -> int:
    store = ToolServerStore(core.db)
    servers = store.all()
    if not servers:
        print("No tool servers yet: cove tools add NAME -- COMMAND [ARGS...]")
        return 0
    offline = core.network.offline and not args.allow_offline_once
    out = sys.stdout
    with _host(core, args) as host:
        for server in servers:
            say(f"{server.name} ({server.kind}): {server.identity}", out)
            print(f"  {NETWORK_NOTE}")
            always = store.rules(server)
            if always:
                say(f"  always allowed: {', '.join(always)}", out)
            if offline:
                print("  not started: Cove is offline (add --allow-offline-once to start it this once).")
                continue
            try:
                tools = host.list_tools(server)
            except ToolServerError as exc:
                say(f"  {exc}", out)
                continue
            for tool in tools:
                say(f"  - {tool.name}: {_first_line(tool.description)}", out)
            if not tools:
                print("  (it offers no tools)")
    return 0


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _refused(sentence: str) -> int:
    """A refusal that holds what a server wrote: on standard error through the terminal-text rule."""
    say(f"cove: {sentence}", sys.stderr)
    return 1


def _call(core: Core, args: argparse.Namespace) -> int:
    store = ToolServerStore(core.db)
    server = store.get(args.name)
    arguments = _arguments(args.arguments)
    if core.network.offline and not args.allow_offline_once:
        raise ToolsError(
            f"Cove is offline, so the tool server '{server.name}' was not started (add --allow-offline-once to start it this once)."
        )
    with _host(core, args) as host:
        try:
            offered = [tool.name for tool in host.list_tools(server)]
        except ToolServerError as exc:
            return _refused(str(exc))
        if args.tool not in offered:
            return _refused(f"the tool server '{server.name}' has no tool '{args.tool}' (it offers: {', '.join(offered) or 'none'}).")
        request = ToolRequest(server, args.tool, arguments)
        if args.allow_tools:
            decision = decide(request, allow_without_asking, store, who="the person (--allow-tools)")
        else:
            decision = decide(request, _ask_on_terminal, store)
        try:
            result = host.call_tool(request, decision)
        except KeyboardInterrupt as exc:  # Ctrl-C or a signal while the call ran: it was sent, so it is recorded
            if decision.allowed:
                record_tool_call(core.db, request, decision, interrupted(request, f"Cove was stopped ({exc or 'SIGINT'})"))
            raise
    record_tool_call(core.db, request, decision, result)
    if result.status == "ok":
        say(result.text, sys.stdout)
        return 0
    if result.status == "tool_error":
        say(result.text, sys.stdout)
        return _refused(f"the tool '{args.tool}' reported an error.")
    return _refused(result.text)


def _host(core: Core, args: argparse.Namespace) -> McpHost:
    kept = core.tool_limits()
    limits = ToolLimits(
        call_timeout_s=kept.call_timeout_s if args.timeout is None else args.timeout,
        result_cap_chars=kept.result_cap_chars if args.max_result is None else args.max_result,
    )
    if limits.call_timeout_s <= 0 or limits.result_cap_chars <= 0:
        raise ToolsError("--timeout and --max-result must be more than zero.")
    core.paths.logs_dir.mkdir(parents=True, exist_ok=True)
    return McpHost(core.paths.logs_dir / LOG_NAME, limits)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolsError(
            f'the arguments are not JSON ({exc.msg} at character {exc.pos}): give an object like \'{{"timezone": "Europe/Paris"}}\'.'
        ) from None
    if not isinstance(value, dict):
        raise ToolsError('the arguments must be a JSON object, like \'{"timezone": "Europe/Paris"}\'.')
    return value


def describe_request(request: ToolRequest, out: TextIO) -> str:
    """The call in full, as the person is asked about it on `out`. On a terminal the names are
    shown through the terminal-text rule and the arguments keep reading as JSON (JSON's escapes),
    so nothing in them can retitle the window or make the question read backwards."""
    server: ToolServer = request.server
    again = f"{request.asked_again}\n" if request.asked_again else ""
    return for_terminal(
        f"{again}The tool server '{server.name}' ({server.identity})\nwants to run the tool '{request.tool}' with these arguments:\n", out
    ) + json_for_terminal(request.arguments_text(), out)


def _ask_on_terminal(request: ToolRequest) -> str:
    print(describe_request(request, sys.stderr), file=sys.stderr)
    print("Allow once [o] / Always allow this tool [a] / Deny [d] (default: deny): ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return {"o": ALLOW_ONCE, "once": ALLOW_ONCE, "a": ALWAYS, "always": ALWAYS}.get(answer, DENY)
