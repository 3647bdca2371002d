"""The environment a stdio tool server starts with: an allow-list of this process's variables,
so no Hugging Face token, API key or other secret of Cove's (or of the shell) reaches it."""

from __future__ import annotations

import os
from collections.abc import Mapping

# Names passed through when set. Everything else is left out, whatever it is called.
ALLOWED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    # Windows needs these to start most programs.
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "COMSPEC",
    "PATHEXT",
    "WINDIR",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "PROGRAMFILES",
    "PROGRAMDATA",
)


def scrubbed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {name: env[name] for name in ALLOWED if name in env and not env[name].startswith("()")}
