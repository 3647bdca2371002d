"""Cove's folders and files are the person's alone (app/private_files.py): a new home is made
0700/0600 by `cove` even under the usual umask 022, a home an older Cove left readable (0755
folders, a 0644 history and log) is closed at the next start and said so once, and
another account on the machine can then read nothing."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.paths import REPO_ROOT

CLI = [sys.executable, "-m", "app.cli.main"]


def _cove(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COVE_HOME": str(home)}
    # The usual desktop umask, whatever this test process has: Cove must not rely on it.
    return subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", *CLI, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _everything(home: Path) -> list[Path]:
    return [home / d for d in ("data", "models", "logs", "cache")] + [p for p in home.rglob("*") if not p.is_symlink()]


def test_a_new_home_is_private_from_the_first_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cove(home, "models", "list")
    assert done.returncode == 0, done.stderr
    assert "yours alone" not in done.stderr  # nothing was ever open: nothing to say
    assert (home / "data" / "cove.db").is_file()
    loose = {str(p.relative_to(home)): oct(_mode(p)) for p in _everything(home) if _mode(p) & 0o077}
    assert loose == {}


def _as_another_account(path: Path) -> subprocess.CompletedProcess | None:
    """`cat path` as the account nobody, where this machine lets the test be another account."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    return subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(path)], capture_output=True, timeout=30)


def test_a_home_left_readable_is_closed_once_and_said_so_once(tmp_path: Path, tiny_gguf: Path) -> None:
    # Inside a folder as open as a home folder (pytest's own temporary folders are 0700).
    open_parent = Path(tempfile.mkdtemp(prefix="cove-open-home-"))
    os.chmod(open_parent, 0o755)
    try:
        _closes_an_open_home(open_parent / "home", tmp_path, tiny_gguf)
    finally:
        shutil.rmtree(open_parent)


def _closes_an_open_home(home: Path, tmp_path: Path, tiny_gguf: Path) -> None:
    assert _cove(home, "models", "import", str(tiny_gguf)).returncode == 0
    log_file = home / "logs" / "engine.log"  # what a log holds (a model's name, an error) is private too
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_bytes(b"a log line")
    outside = tmp_path / "mine.gguf"  # a file of the person's, linked from the models folder: theirs to share
    outside.write_bytes(b"x")
    os.chmod(outside, 0o644)
    (home / "models" / "linked.gguf").symlink_to(outside)
    for path in [home, *_everything(home)]:  # as an older Cove under umask 022 left it
        os.chmod(path, 0o755 if path.is_dir() else 0o644)

    peek = _as_another_account(home / "data" / "cove.db")
    assert peek is None or peek.returncode == 0  # open, as the issue found it

    first = _cove(home, "models", "list")
    assert first.returncode == 0, first.stderr
    assert "yours alone" in first.stderr and str(home / "data") in first.stderr
    loose = {str(p.relative_to(home)): oct(_mode(p)) for p in _everything(home) if _mode(p) & 0o077}
    assert loose == {}
    assert _mode(outside) == 0o644
    assert _mode(log_file) == 0o600 and _mode(home / "data" / "cove.db") == 0o600
    second = _cove(home, "models", "list")
    assert second.returncode == 0 and "yours alone" not in second.stderr

    peek = _as_another_account(home / "data" / "cove.db")
    assert peek is None or (peek.returncode != 0 and b"Permission denied" in peek.stderr)
