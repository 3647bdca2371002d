"""What a tool server is: a name and either a command (stdio) or a URL (Streamable HTTP).

A command is made when the server is added (`stdio_server`): its program and script are resolved
to absolute paths then (app/mcp/identity.py), so the server runs the same files from whatever
folder Cove later runs in."""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.mcp.identity import resolve_command

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ToolServerDefinitionError(ValueError):
    """A name, command or URL that cannot define a tool server (one sentence)."""


@dataclass(frozen=True)
class ToolServer:
    """One server the person added. Exactly one of `command` (argv) and `url` is set."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None

    @property
    def kind(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def identity(self) -> str:
        """The exact command line (shell-quoted, untruncated) or the URL: what the person saw.
        An "always allow" rule is bound to it and to what it runs (app/mcp/identity.py `WhatRuns`)."""
        return self.url if self.url else shlex.join(self.command)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ToolServerDefinitionError(f"'{name}' cannot name a tool server: use letters, digits, '.', '_' or '-' (up to 64).")
    return name


def stdio_server(name: str, command: list[str] | tuple[str, ...], cwd: str | None = None) -> ToolServer:
    """A server that runs `command`, its program and script resolved from `cwd` (default: this
    process's folder) and PATH to absolute paths."""
    if not command or not command[0].strip():
        raise ToolServerDefinitionError("a tool server needs a command: cove tools add NAME -- COMMAND [ARGS...]")
    if any("\x00" in part for part in command):
        raise ToolServerDefinitionError("the command contains a NUL character.")
    check_name(name)
    try:
        resolved = resolve_command(command, cwd)
    except OSError as exc:  # the folder Cove runs in was removed, or cannot be read
        raise ToolServerDefinitionError(
            f"the program and script of '{shlex.join(command)}' cannot be found from here ({exc.strerror or exc}): give their full paths."
        ) from None
    return ToolServer(name=name, command=resolved)


def http_server(name: str, url: str, allow_remote: bool = False) -> ToolServer:
    """A Streamable HTTP server; only on this machine (a loopback address) unless `allow_remote`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ToolServerDefinitionError(f"'{url}' is not a URL Cove can use ({exc}).") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise ToolServerDefinitionError(f"'{url}' is not an http:// or https:// URL with a host.")
    if parts.username or parts.password:
        raise ToolServerDefinitionError("a tool server's URL cannot carry a user name or password.")
    if not allow_remote and not is_loopback(host):
        raise ToolServerDefinitionError(
            f"'{host}' is not this machine: tool servers are reached on 127.0.0.1, ::1 or localhost "
            "(add --allow-remote to use another machine's server)."
        )
    return ToolServer(name=check_name(name), url=url)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
