"""The `cove` command line run as a person runs it (a subprocess with its own COVE_HOME), and the
check that a failure is a clean sentence: shared by the CLI, tool-server and tool-loop tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT


def cove(home: Path, *args: str, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "COVE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_clean_error(done: subprocess.CompletedProcess, code: int = 1) -> str:
    """`done` failed with `code`, said something and showed no traceback; returns its last line."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines, "an error must say something"
    return lines[-1]
