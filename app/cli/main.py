"""Entry point of the `cove` command: parse arguments, open the core, run one subcommand.

Exit status: 0 success, 2 usage error, 1 any other error (one readable line on stderr, no
traceback unless --debug), 130 when Ctrl-C stopped a reply.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app import __version__
from app.cli.terminal_text import say
from app.log_redact import install_redaction
from app.private_files import keep_private
from app.termination import Terminated, raise_on_termination, restore

if TYPE_CHECKING:
    from models.network import NetworkActivity

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Each subcommand: its module (whose add_parser(sub) registers it) and its one-line help, in the
# order `cove --help` lists them. Only the module of the command being run is imported: a command
# starts without loading what the others need (tests/app/cli/test_startup_imports.py checks the
# help lines here against each module's own).
COMMANDS: dict[str, tuple[str, str]] = {
    "chat": ("app.cli.chat_cmd", "chat with a local model; the reply streams to stdout"),
    "models": ("app.cli.models_cmd", "list, inspect, import and remove local models"),
    "history": ("app.cli.history_cmd", "list, read, search, export and delete saved conversations"),
    "bench": ("app.cli.bench_cmd", "measure prompt (512 tokens) and generation (128 tokens) speed"),
    "auth": ("app.cli.auth_cmd", "sign in to the Hugging Face Hub for gated models (the token goes to the OS keyring)"),
    "serve": ("app.cli.serve_cmd", "serve the installed models over the OpenAI API on 127.0.0.1"),
    "record": ("app.cli.record_cmd", "the written record of every request: verify it, export it, its sealing key"),
    "remote": ("app.cli.remote_cmd", "your own servers (llama-server, vLLM, Ollama, another Cove): add, pair, list, their models, remove"),
    "tools": ("app.cli.tools_cmd", "your own tool servers (MCP): add, list their tools, call one, remove"),
    "docs": ("app.cli.docs_cmd", "your document collections: add, list, status, patterns, reindex, remove, search, embedder"),
    "setup": ("app.cli.setup_cmd", "fetch the instruct starter model (Qwen2.5-Coder-0.5B-Instruct) and choose it"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, just that subcommand's arguments (with `only=""`,
    no subcommand's): every other subcommand is there by name and help line alone (enough for
    `cove --help` and for the "invalid choice" error), and its module is not imported."""
    parser = argparse.ArgumentParser(
        prog="cove",
        description="Cove: chat with local GGUF models. Your prompts never leave this machine.",
    )
    parser.add_argument("--version", action="version", version=f"cove {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_line) in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand argparse will run for `argv`: its first argument that is not an option
    (none of cove's own options takes a value), or the one after `--`."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(command_in(argv) or "").parse_args(argv)  # exits 2 with a usage line on bad arguments
    if args.command is None:
        # No subcommand: chat (the `cove` console script opens the window instead, see ui/main.py).
        args = build_parser("chat").parse_args(["chat", *argv])
    _print_what_it_can()
    install_redaction()  # no token or Authorization header in any log line (app/log_redact.py)
    keep_private()  # what this run creates is the person's alone (app/private_files.py)
    previous_handlers = raise_on_termination()  # SIGTERM/SIGHUP stop a reply like Ctrl-C (app/termination.py)
    try:
        return _run(args)
    except Terminated as exc:  # a signal before a reply started (e.g. while the history opened)
        return exc.exit_code
    finally:
        restore(previous_handlers)


def _run(args: argparse.Namespace) -> int:
    try:
        from app.core import open_core

        core = open_core()
    except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence
        return _report(exc, args.debug)
    try:
        for notice in core.startup_notices:  # damaged or newer history, unreadable settings, repaired replies
            print(f"cove: {notice.text}", file=sys.stderr)
        core.network.add_listener(_announce_network)
        return int(args.run(core, args) or 0)
    except Terminated as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        print("\ncove: stopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001
        return _report(exc, args.debug)
    finally:
        core.close()


def _print_what_it_can() -> None:
    """Standard output in an encoding that cannot show every character (PYTHONIOENCODING=ascii,
    a legacy locale) shows '?' for those instead of failing the command; the history keeps
    the exact text. (Standard error already writes them as escapes.)"""
    if getattr(sys.stdout, "errors", None) == "strict":
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):
                pass


def _announce_network(activity: NetworkActivity, started: bool) -> None:
    """The command line's network indicator: one stderr line per Hub call (downloads show progress)."""
    if started and activity.kind != "download":
        print(f"cove: {activity.label}…", file=sys.stderr, flush=True)


def _report(exc: BaseException, debug: bool) -> int:
    from app.errors import describe_error

    if debug:
        traceback.print_exc()
    # The sentence may quote what a tool server, a model file or a document wrote.
    say(f"cove: {describe_error(exc)}", sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
