"""How a stdio tool server is started: its program found first (one sentence when it is missing
or cannot be run), its scrubbed environment, and on POSIX the leash in front of it.

The `mcp` SDK's stdio client starts the process in a new session and kills that process group
only when the process outlives the grace after its input closes. A server that forks and then
exits normally would leave its children running, and nothing the SDK starts outlives a SIGKILL
of Cove. So the SDK starts the leash (app/mcp/leash.py) in the server's place: the leash runs
the server and ends everything the server left, however the server or Cove ended. Windows keeps
the SDK's own Job Object, which ends the whole tree.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from app.child_command import child_command, is_frozen
from app.mcp.environment import scrubbed_environment
from app.mcp.servers import ToolServer

LEASH_MODULE = "app.mcp.leash"


def stdio_parameters(server: ToolServer) -> Any:
    """The SDK's StdioServerParameters for `server`; raises FileNotFoundError or PermissionError
    (made into one sentence by app/mcp/failures.py) when its program cannot be run."""
    from mcp.client.stdio import StdioServerParameters

    env = scrubbed_environment()
    command = list(server.command)
    if os.name == "posix":
        find_program(command[0], env.get("PATH", os.defpath))
        command = [*leash_command(), str(os.getpid()), server.name, "--", *command]
    return StdioServerParameters(command=command[0], args=command[1:], env=env, encoding_error_handler="replace")


def leash_command() -> list[str]:
    """The argv prefix that runs the leash: the leash file under an isolated Python (no site, no
    PYTHON* variables, nothing from the working folder), or the frozen app as its child."""
    if is_frozen():
        return child_command(LEASH_MODULE)  # listed in CHILD_MODULES, so packaging/entry.py runs it
    return [sys.executable, "-I", "-S", str(Path(__file__).with_name("leash.py"))]


def find_program(program: str, path: str) -> str:
    """Where `program` is, as exec looks for it: as given when it names a folder, else on `path`."""
    if os.sep in program or (os.altsep and os.altsep in program):
        candidates = [program]
    else:
        candidates = [os.path.join(folder or ".", program) for folder in path.split(os.pathsep)]
    refused: OSError | None = None
    for candidate in candidates:
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and os.access(candidate, os.X_OK):
            return candidate
        refused = PermissionError(13, "Permission denied", candidate)
    raise refused or FileNotFoundError(2, "No such file or directory", program)
