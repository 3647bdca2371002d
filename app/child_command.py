"""How Cove starts one of its own Python modules as a child process, frozen or not.

From a checkout or a pip install a child is `python -m MODULE`. In the PyInstaller build
(packaging/) there is no python: the app's own executable is started again as
`cove --cove-child MODULE ...`, and packaging/entry.py runs MODULE as `__main__` there.
Only the modules in CHILD_MODULES may be started this way (entry.py refuses others).

Invariant across the process boundary: the child gets exactly the arguments that follow
the module name, so `sys.argv[1:]` in the child is the same frozen or not, and file
descriptors passed with `pass_fds` stay open because the frozen executable runs the child
in the same process (PyInstaller's one-folder bootloader on Linux does not re-exec).
"""

from __future__ import annotations

import sys

CHILD_FLAG = "--cove-child"

# Every module Cove starts as a child process. Add a new child here (and it is bundled:
# packaging/cove.spec adds these as hidden imports, since runpy imports them by name).
CHILD_MODULES: frozenset[str] = frozenset({"app.engine.host.main", "models.download.child", "app.mcp.leash"})


def is_frozen() -> bool:
    """True inside the PyInstaller build (sys.frozen is set by its bootloader)."""
    return bool(getattr(sys, "frozen", False))


def child_command(module: str) -> list[str]:
    """The argv prefix that runs `module` as a child: append the child's own arguments."""
    if module not in CHILD_MODULES:
        raise ValueError(f"{module} is not one of Cove's child processes ({', '.join(sorted(CHILD_MODULES))})")
    if is_frozen():
        return [sys.executable, CHILD_FLAG, module]
    return [sys.executable, "-m", module]
