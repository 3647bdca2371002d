"""`cove remote add|pair|list|models|remove`: the person's own servers (app/remote/) from the terminal.

A key is never taken from the command line (argv is visible to every user through `ps` and
/proc and ends up in shell history): `cove remote add` asks for it with a hidden prompt on a
terminal, or reads one line of standard input with `--key-stdin`; `--no-key` says the server
needs none. It goes to the OS keyring, never into Cove's files, and no output shows it.
What a server says about itself (its kind, version, model ids) is untrusted text: on a
terminal its control characters are shown as escapes (app/cli/terminal_text.py).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from app.cli.terminal_text import print_json_for, say
from app.core import Core
from app.log_redact import redact
from app.remote.connections import Connection
from app.remote.errors import RemoteProblem
from app.remote.probe import probe
from app.remote.remote_model import remote_models
from models.network import NetworkRefused

_MAX_LINE = 4096

NO_ARGV_KEY = (
    "unexpected argument (not shown, in case it is a key): a connection's key is never taken from the "
    "command line; `cove remote add NAME URL` asks for it, or pipe it with --key-stdin"
)


class _KeySafeParser(argparse.ArgumentParser):
    """An argument parser that never echoes what it did not expect (it could be a key)."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(NO_ARGV_KEY)
        return namespace, extras

    def error(self, message: str):  # type: ignore[override]
        super().error(redact(message))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `cove remote`."""
    p = sub.add_parser(
        "remote",
        help="your own servers (llama-server, vLLM, Ollama, another Cove): add, pair, list, their models, remove",
        description="Connections to OpenAI-compatible servers of your own. Chat with one of their models "
        "with `cove chat --model MODEL_ID@NAME`; its key is kept in the OS keyring.",
    )
    p.__class__ = _KeySafeParser  # `cove remote add gpu URL sk-...` must fail without echoing the key
    rsub = p.add_subparsers(dest="remote_command", metavar="COMMAND", required=True, parser_class=_KeySafeParser)

    add = rsub.add_parser(
        "add",
        help="add a connection and list its models (the key is asked for, never an argument)",
        description="Add a connection to a server of yours and ask it what it is and which models it has. "
        "On a terminal its key is asked for without echo (Enter for none); otherwise give --key-stdin "
        "(one line of standard input) or --no-key.",
    )
    add.add_argument("name", help="a short name: letters, digits, '.', '_' or '-' (e.g. gpu-box)")
    add.add_argument("url", help="the server's API root, e.g. http://gpu-box.lan:8000/v1 (/v1 is added to a bare host)")
    add.add_argument("--ca-file", metavar="FILE", help="a CA or certificate file to trust for this server (self-signed TLS)")
    key = add.add_mutually_exclusive_group()
    key.add_argument("--key-stdin", action="store_true", help="read the key from one line of standard input")
    key.add_argument("--no-key", action="store_true", help="the server needs no key")
    add.add_argument("--json", action="store_true")
    add.set_defaults(run=run_add)

    pair = rsub.add_parser(
        "pair",
        help="pair with another Cove with the code `cove serve pair` showed there: no key to copy, its certificate pinned",
        description="Pair with another Cove: it checks that the machine at URL shows the certificate the code "
        "names before it sends anything, receives a key of its own (kept in the OS keyring), and trusts that "
        "certificate alone for this connection from then on. The code works once, for 10 minutes.",
    )
    pair.add_argument("name", help="what to call that machine here: letters, digits, '.', '_' or '-' (e.g. desktop)")
    pair.add_argument("url", help="that Cove's address, e.g. https://desktop.local:8642")
    pair.add_argument("code", nargs="?", help="the code `cove serve pair` showed (asked for when left out)")
    pair.add_argument("--json", action="store_true")
    pair.set_defaults(run=run_pair)

    ls = rsub.add_parser("list", help="your connections (never their keys)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    models = rsub.add_parser("models", help="ask a connection's server for its models again and list them")
    models.add_argument("name")
    models.add_argument("--json", action="store_true")
    models.set_defaults(run=run_models)

    remove = rsub.add_parser("remove", help="forget a connection and its key")
    remove.add_argument("name")
    remove.set_defaults(run=run_remove)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


def _read_key(name: str, args: argparse.Namespace) -> str | None:
    """The key from a hidden prompt or one line of standard input; None for a server without one."""
    if args.no_key:
        return None
    if args.key_stdin:
        line = sys.stdin.readline(_MAX_LINE) if sys.stdin is not None else ""
        if not line.strip():
            raise ValueError("--key-stdin was given, but standard input held no key; pipe it in, or use --no-key")
        return line.strip()
    if not _isatty(sys.stdin):
        raise ValueError(
            "say how this server is reached: --key-stdin reads its key from standard input, "
            "--no-key adds it without one (a key is never taken as an argument)"
        )
    try:
        typed = getpass.getpass(f"Key for {name} (input hidden; Enter if the server needs none): ")
    except EOFError:
        return None
    return typed.strip() or None


def run_add(core: Core, args: argparse.Namespace) -> int:
    if core.read_only:
        raise RuntimeError(core.notice or "the history is open read-only, so a connection cannot be saved")
    key = _read_key(args.name, args)
    connections = core.connections
    connection = connections.add(args.name, args.url, key=key, ca_file=args.ca_file)
    if connections.last_notice is not None:  # the key could be kept in this run's memory only
        say(
            f"cove: {connections.last_notice} For a command that means it is gone when the command exits: set up a "
            "secure keyring and add the key again (`cove remote remove`, then `add`), or add the connection from the window.",
            sys.stderr,
        )
    problem: str | None = None
    try:
        connection = connections.record_probe(connection.name, probe(connection, key, core.network))
    except (RemoteProblem, NetworkRefused) as exc:
        problem = str(exc)
    if args.json:
        print_json_for({**_connection_json(core, connection), "probe_error": problem}, sys.stdout)
        return 0
    say(f"Added {connection.name} ({connection.base_url}).", sys.stdout)
    if problem is not None:
        say(
            f"cove: it is kept, but its server could not be asked about itself: {problem} "
            f"`cove remote models {connection.name}` asks again.",
            sys.stderr,
        )
        return 0
    _print_found(connection)
    return 0


def run_pair(core: Core, args: argparse.Namespace) -> int:
    """Pair (app/remote/pairing.py), then ask the server what it serves, as `add` does."""
    from app.remote.pairing import pair

    if core.read_only:
        raise RuntimeError(core.notice or "the history is open read-only, so a connection cannot be saved")
    code = args.code
    if code is None:
        if not _isatty(sys.stdin):
            code = sys.stdin.readline(_MAX_LINE) if sys.stdin is not None else ""
        else:
            try:
                code = input("Pairing code (from `cove serve pair` on the other machine): ")
            except EOFError:
                code = ""
    paired = pair(core.connections, core.network, args.name, args.url, code)
    connection = paired.connection
    if paired.notice is not None:
        say(f"cove: {paired.notice} For a command that means it is gone when the command exits: pair again from the window.", sys.stderr)
    problem: str | None = None
    try:
        connection = core.connections.record_probe(connection.name, probe(connection, core.connections.key(connection.name), core.network))
    except (RemoteProblem, NetworkRefused) as exc:
        problem = str(exc)
    if args.json:
        shown = {**_connection_json(core, connection), "key_name": paired.key_name, "fingerprint": paired.fingerprint}
        print_json_for({**shown, "probe_error": problem}, sys.stdout)
        return 0
    say(
        f"Paired with {connection.host} as {connection.name}: its certificate (SHA-256 {paired.fingerprint}) is pinned, "
        f"and the key it made for this machine ({paired.key_name!r} there) is kept in the keyring.",
        sys.stdout,
    )
    if problem is not None:
        say(f"cove: its models could not be listed yet: {problem} `cove remote models {connection.name}` asks again.", sys.stderr)
        return 0
    _print_found(connection)
    return 0


def _print_found(connection: Connection) -> None:
    server = connection.server or {}
    kind = server.get("kind") or "an OpenAI-compatible server"
    version = f" {server['version']}" if server.get("version") else ""
    models = remote_models(connection)
    say(f"{connection.host}: {kind}{version}, {_count(len(models))}.", sys.stdout)
    for model in models:
        say(f"  {model.name}", sys.stdout)
    if models:
        say(f"Chat with one: cove chat --model {models[0].name}", sys.stdout)


def _count(n: int) -> str:
    return "no models" if n == 0 else ("1 model" if n == 1 else f"{n} models")


def _connection_json(core: Core, connection: Connection) -> dict[str, Any]:
    server = connection.server or {}
    return {
        "name": connection.name,
        "url": connection.base_url,
        "host": connection.host,
        "ca_file": connection.ca_file,
        "kind": server.get("kind"),
        "version": server.get("version"),
        "probed_at": server.get("probed_at"),
        "models": [_model_json(m) for m in remote_models(connection)],
        "key": core.connections.key(connection.name) is not None,  # whether there is one, never the key
        "public_ok": connection.public_ok,
        "created_at": connection.created_at,
    }


def _model_json(model: Any) -> dict[str, Any]:
    return {
        "name": model.name,
        "model_id": model.model_id,
        "connection": model.connection,
        "host": model.host,
        "kind": model.kind,
        "fingerprint": model.fingerprint,
    }


def run_list(core: Core, args: argparse.Namespace) -> int:
    connections = core.connections.list()
    if args.json:
        print_json_for([_connection_json(core, c) for c in connections], sys.stdout)
        return 0
    if not connections:
        print("No connections yet. Add a server of yours with `cove remote add NAME URL`.")
        return 0
    for c in connections:
        kind = (c.server or {}).get("kind") or "not reached yet"
        key = "yes" if core.connections.key(c.name) is not None else "no"
        say(f"{c.name}  {c.base_url}  {kind}  {_count(len(remote_models(c)))}  key: {key}", sys.stdout)
    return 0


def run_models(core: Core, args: argparse.Namespace) -> int:
    connections = core.connections
    connection = connections.get(args.name)
    if core.read_only:
        raise RuntimeError(core.notice or "the history is open read-only, so what the server says cannot be saved")
    connection = connections.record_probe(connection.name, probe(connection, connections.key(connection.name), core.network))
    models = remote_models(connection)
    if args.json:
        print_json_for([_model_json(m) for m in models], sys.stdout)
        return 0
    if not models:
        say(f"{connection.name} ({connection.host}) has no models to offer.", sys.stdout)
    for model in models:
        say(model.name, sys.stdout)
    return 0


def run_remove(core: Core, args: argparse.Namespace) -> int:
    connection = core.connections.get(args.name)
    had_key = core.connections.key(connection.name) is not None
    core.connections.remove(connection.name)
    if core.connections.last_notice is not None:  # the keyring would not forget the key
        say(f"cove: removed {connection.name}, but: {core.connections.last_notice}", sys.stderr)
        return 1
    pinned = " and its pinned certificate" if core.connections.is_pinned(connection) else ""
    say(f"Removed {connection.name} ({connection.base_url}){' and its key' if had_key else ''}{pinned}.", sys.stdout)
    return 0
