"""Entry point of the `cove` command: parse arguments, open the core, run one subcommand.

Exit status: 0 success, 2 usage error, 1 any other error (one readable line on stderr, no
traceback unless --debug), 130 when Ctrl-C stopped a reply.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app import __version__
from app.cli import (
    auth_cmd,
    bench_cmd,
    chat_cmd,
    docs_cmd,
    history_cmd,
    models_cmd,
    record_cmd,
    remote_cmd,
    serve_cmd,
    setup_cmd,
    tools_cmd,
)
from app.cli.terminal_text import say
from app.errors import describe_error
from app.log_redact import install_redaction
from app.private_files import keep_private
from app.termination import Terminated, raise_on_termination, restore

if TYPE_CHECKING:
    from models.network import NetworkActivity

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cove",
        description="Cove: chat with local GGUF models. Your prompts never leave this machine.",
    )
    parser.add_argument("--version", action="version", version=f"cove {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat_cmd.add_parser(sub)
    models_cmd.add_parser(sub)
    history_cmd.add_parser(sub)
    bench_cmd.add_parser(sub)
    auth_cmd.add_parser(sub)
    serve_cmd.add_parser(sub)
    record_cmd.add_parser(sub)
    remote_cmd.add_parser(sub)
    tools_cmd.add_parser(sub)
    docs_cmd.add_parser(sub)
    setup_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a usage line on bad arguments
    if args.command is None:
        # No subcommand: chat (the `cove` console script opens the window instead, see ui/main.py).
        args = parser.parse_args(["chat", *argv])
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
    if debug:
        traceback.print_exc()
    # The sentence may quote what a tool server, a model file or a document wrote.
    say(f"cove: {describe_error(exc)}", sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
