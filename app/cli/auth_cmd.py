"""`cove auth login|status|logout`: the Hugging Face token for gated models.

The token is never taken from the command line (argv is visible to every user through
`ps` and /proc and ends up in shell history): `cove auth login` asks for it with a hidden
prompt, or reads one line from standard input when that is not a terminal
(`cove auth login < token.txt`). It goes to a secure OS keyring when there is one; without
one it could only be kept in this process's memory, which for a command ends when the
command does, and the command says so. The token is never checked online: Cove's only
network calls are Hub search, file listings, header reads and downloads.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from app.cli.output import print_json
from app.hub_token import TOKENS_PAGE, InvalidToken, TokenStore
from app.log_redact import redact

EXIT_OK, EXIT_ERROR = 0, 1
_MAX_LINE = 4096

NO_ARGV_TOKEN = (
    "unexpected argument (not shown, in case it is a token): the token is never taken from the "
    "command line; run `cove auth login` and paste it at the prompt, or pipe it: `cove auth login < token.txt`"
)

MEMORY_ONLY_FOR_CLI = (
    "For a command that means it is gone as soon as `cove auth login` exits: nothing was saved. "
    "To keep a token, set up a secure keyring (GNOME Keyring or KWallet through the Secret Service, "
    "the macOS Keychain or the Windows Credential Locker) and run `cove auth login` again, or sign in "
    "from the window's Settings, which keeps it for as long as the window stays open."
)


class _TokenSafeParser(argparse.ArgumentParser):
    """An argument parser that never echoes what it did not expect (it could be a token)."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(NO_ARGV_TOKEN)
        return namespace, extras

    def error(self, message: str):  # type: ignore[override]
        super().error(redact(message))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `cove auth`."""
    p = sub.add_parser(
        "auth",
        help="sign in to the Hugging Face Hub for gated models (the token goes to the OS keyring)",
        description="Sign in to the Hugging Face Hub so Cove can download gated models. "
        "The token is kept in the OS keyring, never in Cove's files, logs or huggingface_hub's token file.",
    )
    # `cove auth hf_...` or `cove auth login hf_...` must fail without echoing the argument.
    p.__class__ = _TokenSafeParser
    asub = p.add_subparsers(dest="auth_command", metavar="COMMAND", required=True, parser_class=_TokenSafeParser)

    login = asub.add_parser(
        "login",
        help="save a Hugging Face access token (asked for; never taken from the command line)",
        description="Save a Hugging Face access token (a read token is enough; create one at "
        f"{TOKENS_PAGE}). On a terminal it is asked for without echo; otherwise one line is read "
        "from standard input. It is never accepted as an argument.",
    )
    login.set_defaults(run=run_login)

    status = asub.add_parser("status", help="whether a token is stored, and where (never the token itself)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=run_status)

    logout = asub.add_parser("logout", help="remove the stored token")
    logout.set_defaults(run=run_logout)


def _err(message: str) -> None:
    print(f"cove: {message}", file=sys.stderr)


def _isatty(stream) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


def _read_token(interactive: bool) -> str | None:
    """One token from a hidden prompt (terminal) or one line of standard input; None if nothing."""
    if interactive:
        try:
            return getpass.getpass("Hugging Face access token (input hidden): ")
        except EOFError:
            return None
    if sys.stdin is None:
        return None
    return sys.stdin.readline(_MAX_LINE) or None


def run_login(core, args: argparse.Namespace) -> int:
    store = TokenStore()
    interactive = _isatty(sys.stdin)
    if interactive:
        print(f"Paste a Hugging Face access token (a read token is enough; create one at {TOKENS_PAGE}).", file=sys.stderr)
        if not store.status().secure:
            _err("no secure keyring is available here, so a token given now will not outlast this command (Ctrl-C to stop).")
    token = _read_token(interactive)
    if token is None or not token.strip():
        _err("no token was given. Run `cove auth login` and paste it at the prompt, or pipe it: `cove auth login < token.txt`.")
        return EXIT_ERROR
    try:
        result = store.save(token)
    except InvalidToken as exc:
        _err(str(exc))
        return EXIT_ERROR
    if result.persisted:
        print(f"Signed in: the token is saved in the {store.status().backend}. `cove auth logout` removes it.")
        return EXIT_OK
    _err(f"{result.notice} {MEMORY_ONLY_FOR_CLI}")
    return EXIT_ERROR


def _huggingface_token_hints() -> list[str]:
    """Sentences about tokens huggingface_hub itself would use and Cove ignores on purpose."""
    hints = []
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if os.environ.get(var):
            hints.append(
                f"{var} is set in the environment; Cove does not use it (a variable reaches every program "
                "started from here) and keeps its own token in the keyring."
            )
    path = os.environ.get("HF_TOKEN_PATH")
    if not path:
        hf_home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
        )
        path = os.path.join(hf_home, "token")
    try:
        if Path(path).expanduser().is_file():
            hints.append(
                f"huggingface_hub's token file ({path}) is plain text; Cove does not read it and keeps its own token in the keyring."
            )
    except OSError:
        pass
    return hints


def run_status(core, args: argparse.Namespace) -> int:
    status = TokenStore().status()
    if args.json:
        print_json(status)
        return EXIT_OK
    if status.storage == "keyring":
        print(f"Signed in: a token is saved in the {status.backend}.")
    elif status.storage == "memory":
        print("Signed in for this run only: the token is in memory, not saved.")
    else:
        print("Not signed in. Gated models need a Hugging Face token: `cove auth login`.")
    if status.secure and status.storage != "keyring":
        print(f"Keyring: {status.backend} (secure).")
    if status.notice:
        print(status.notice)
    for hint in _huggingface_token_hints():
        print(hint)
    return EXIT_OK


def run_logout(core, args: argparse.Namespace) -> int:
    store = TokenStore()
    before = store.status()
    store.clear()
    after = store.status()
    if store.last_notice or after.present:
        _err(store.last_notice or f"the token could not be removed from the {after.backend}.")
        return EXIT_ERROR
    if before.storage == "keyring":
        print(f"Signed out: the token was removed from the {before.backend}.")
    elif before.storage == "memory":
        print("Signed out: the token this run kept in memory is forgotten.")
    else:
        print("No token was stored; nothing to remove.")
    return EXIT_OK
