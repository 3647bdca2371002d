"""What a stdio tool server really runs: its program and script as absolute paths (resolved when
the server is added), and a `WhatRuns` (those paths and the SHA-256 of each file) that an "always
allow" rule is tied to, with the sentence that says what changed when they differ."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass

# Programs whose first file argument is the code they run (`python srv.py`, `node srv.js`,
# `uv run srv.py`, `java -jar srv.jar`); matched on the name without a directory or ".exe".
_INTERPRETER = re.compile(
    r"^(python[0-9.]*w?|py|pypy[0-9.]*|node(js)?|deno|bun|bunx|npx|tsx|ts-node|uv|uvx|pipx|poetry|pdm|hatch"
    r"|ruby|perl|php|bash|sh|zsh|dash|ksh|fish|pwsh|powershell|lua(jit)?[0-9.]*|rscript|java)$"
)
# A script is recognised by its suffix even before the file exists.
_SCRIPT_SUFFIXES = (
    ".py",
    ".pyw",
    ".pyz",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".mts",
    ".rb",
    ".pl",
    ".php",
    ".sh",
    ".bash",
    ".zsh",
    ".ps1",
    ".lua",
    ".r",
    ".jar",
)
# After these the rest is code given inline (`-c`, `-e`), a module (`-m`) or stdin: no script file.
# A shell's `-e` is an option (stop at the first error), so a shell stops only at `-c`.
_NO_SCRIPT_AFTER = frozenset({"-m", "-c", "-e", "-E", "--eval", "-p", "--print", "-"})
_SHELL = re.compile(r"^(bash|sh|zsh|dash|ksh|fish)$")
_NO_SCRIPT_AFTER_SHELL = frozenset({"-c", "-"})
MISSING, UNREADABLE = "missing", "unreadable"
_SETTLED_NS = 3_000_000_000  # a file's ctime older than this is past any coarse tick of the clock


def resolve_command(command: Sequence[str], cwd: str | None = None) -> tuple[str, ...]:
    """`command` with its program and script as absolute paths, read from `cwd` (default: this
    process's folder) and, for a bare program name, from PATH. A program not on PATH stays as it
    is (starting it then says it was not found); every other argument is kept unchanged."""
    base = cwd or os.getcwd()
    argv = list(command)
    program = _program_path(argv[0], base)
    if program is not None:
        argv[0] = program
    index = script_index(argv, base)
    if index is not None:
        argv[index] = _absolute(argv[index], base)
    return tuple(argv)


def script_index(command: Sequence[str], cwd: str | None = None) -> int | None:
    """Where an interpreter's script is in `command`: the first argument that is not an option and
    names a file (or has a script's suffix); None for a program that is not an interpreter."""
    name = os.path.basename(command[0]).lower()
    name = name[:-4] if name.endswith(".exe") else name
    if not _INTERPRETER.match(name):
        return None
    base = cwd or os.getcwd()
    stops = _NO_SCRIPT_AFTER_SHELL if _SHELL.match(name) else _NO_SCRIPT_AFTER
    for index, argument in enumerate(command[1:], start=1):
        if argument in stops:
            return None
        if argument.startswith("-") or not argument:
            continue
        if argument.lower().endswith(_SCRIPT_SUFFIXES) or os.path.isfile(_absolute(argument, base)):
            return index
    return None


@dataclass(frozen=True)
class WhatRuns:
    """What a server runs now. `runs`: its argv with the program and script resolved (a URL server:
    the URL); `files`: (absolute path, SHA-256, or MISSING / UNREADABLE) of the program and script."""

    runs: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> str:
        return json.dumps({"runs": list(self.runs), "files": [list(f) for f in self.files]}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | None) -> WhatRuns | None:
        """The WhatRuns kept in `text`, or None when there is none or it cannot be read."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(tuple(str(a) for a in data["runs"]), tuple((str(p), str(h)) for p, h in data["files"]))
        except (ValueError, KeyError, TypeError):
            return None


def what_runs(command: Sequence[str], url: str | None = None, cwd: str | None = None) -> WhatRuns:
    """What a server defined by `command` (or `url`) runs if it starts now, from `cwd` (default:
    this process's folder, the one the host starts stdio servers in)."""
    if url:
        return WhatRuns((url,))
    try:
        base = cwd or os.getcwd()
        runs = resolve_command(command, base)
    except OSError:  # the folder Cove runs in is gone: nothing relative can be resolved
        return WhatRuns(tuple(command))
    paths = [runs[0]]
    index = script_index(runs, base)
    if index is not None:
        paths.append(runs[index])
    return WhatRuns(runs, tuple((path, file_digest(path)) for path in paths if os.path.isabs(path)))


def what_changed(kept: WhatRuns, now: WhatRuns, command: Sequence[str] = ()) -> str | None:
    """How `now` differs from what "always" was chosen for, as the end of a sentence ("…, but
    {this}"), or None: the same. `command`: the server's command as kept, to say where a path
    that is not absolute was looked up."""
    if kept.runs != now.runs:
        if len(kept.runs) == len(now.runs):
            index, was, is_now = next((i, a, b) for i, (a, b) in enumerate(zip(kept.runs, now.runs)) if a != b)
            written = command[index] if index < len(command) else is_now
            where = (
                ""
                if os.path.isabs(os.path.expanduser(written))
                else f" ('{written}' is looked up on PATH)"
                if index == 0 and os.sep not in written
                else f" ('{written}' is read from the folder Cove runs in)"
            )
            return f"it would now run {is_now} where it ran {was} then{where}"
        return f"it would now run {' '.join(now.runs)} instead of {' '.join(kept.runs)}"
    for (path, was), (_path, is_now) in zip(kept.files, now.files):
        if was != is_now:
            if is_now in (MISSING, UNREADABLE):
                return f"{path} is {is_now} now"
            return f"{path} has changed since (its SHA-256 was {was[:12]}…, now {is_now[:12]}…)"
    if kept.files != now.files:
        return "the files it runs are not the ones it ran then"
    return None


def file_digest(path: str) -> str:
    """The SHA-256 of the file at `path` (a link is followed), MISSING or UNREADABLE."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return MISSING
    except OSError:
        return UNREADABLE
    # Kept per file identity and times: a write, even one that puts the old mtime back, changes its
    # ctime. File times tick coarsely, so a file changed in the last seconds (a second write could
    # keep its times) is hashed afresh each time, as git does with "racy" entries.
    if time.time_ns() - stat.st_ctime_ns < _SETTLED_NS:
        return _digest.__wrapped__(path, 0, 0, 0, 0, 0)
    return _digest(path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@functools.lru_cache(maxsize=64)
def _digest(path: str, _dev: int, _ino: int, _size: int, _mtime: int, _ctime: int) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    except OSError:
        return UNREADABLE
    return digest.hexdigest()


def _program_path(program: str, base: str) -> str | None:
    expanded = os.path.expanduser(program)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        return _absolute(expanded, base)
    found = shutil.which(expanded)
    return os.path.abspath(found) if found else None


def _absolute(path: str, base: str) -> str:
    """`path` made absolute against `base`, `~` expanded; links are kept as written (a virtual
    environment's `python` is a link that must be run by its own path)."""
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))
