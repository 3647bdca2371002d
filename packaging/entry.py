"""The frozen app's entry point (PyInstaller runs this file as `__main__` of dist/Cove/cove).

Two ways in:
  cove --cove-child MODULE ARGS...   run one of Cove's child processes (the engine host, the
                                     downloader) as `python -m MODULE ARGS...` would; see
                                     app/child_command.py, which builds this command line
  cove [ARGS...]                     what the `cove` console script does (ui.main:main): the
                                     window without arguments, the command line with them
"""

from __future__ import annotations

import runpy
import sys


def _run_child(argv: list[str]) -> int:
    from app.child_command import CHILD_MODULES

    if len(argv) < 3 or argv[2] not in CHILD_MODULES:
        named = argv[2] if len(argv) > 2 else "(none)"
        print(f"cove: {named} is not one of Cove's child processes", file=sys.stderr)
        return 2
    module = argv[2]
    # The child sees the argv `python -m MODULE ARGS...` would give it: argv[0] becomes the
    # module's file (runpy's alter_sys), argv[1:] are the child's own arguments.
    sys.argv = [argv[0], *argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)  # the module ends in sys.exit()
    return 0


def main() -> int:
    argv = list(sys.argv)
    # Cove never uses multiprocessing, but if a library ever does, a spawned worker (Windows,
    # macOS, or the resource tracker on Linux) re-enters here; freeze_support() takes it.
    if "--multiprocessing-fork" in argv or "-c" in argv[-2:-1]:
        import multiprocessing

        multiprocessing.freeze_support()
    if len(argv) > 1 and argv[1] == "--cove-child":
        return _run_child(argv)
    from ui.main import main as cove_main

    return cove_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
