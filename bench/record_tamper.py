"""The table of issue 29, re-run as a person would see it: for each way of editing the database
by hand (the edits of tests/support/record_tampering.py), six entries are written by Cove in a home
of their own, the database is edited, and `cove record verify` runs; the table shows its exit
status and what it said. Also with the verification key (`--key`), exported before the edit.

Usage: .venv/bin/python bench/record_tamper.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")  # never the person's keyring

from app.core import open_core  # noqa: E402
from app.paths import resolve_paths  # noqa: E402
from app.store.request_log import RequestLog  # noqa: E402
from tests.support.record_tampering import TAMPERING, fill_record  # noqa: E402


def _cove(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COVE_HOME": str(home)},
    )


def _said(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stdout.splitlines() if not line.startswith("Its seals were checked")]
    return " ".join(lines[1:]) or lines[0] if lines else done.stderr.strip()


def main() -> int:
    print("| tampering | verify | verify --key FILE |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="cove-tamper-") as tmp:
        cases = {"nothing (Cove's own use)": (lambda core: None, {}), **TAMPERING}
        for i, (kind, (edit, _expected)) in enumerate(cases.items()):
            home = Path(tmp) / f"home{i}"
            core = open_core(resolve_paths({"COVE_HOME": str(home)}))
            fill_record(RequestLog(core.db), 6, conversation_id="c-1")
            core.close()
            key = Path(tmp) / f"key{i}.txt"
            key.write_text(_cove(home, "record", "key", "--export").stdout, encoding="utf-8")
            core = open_core(resolve_paths({"COVE_HOME": str(home)}))
            edit(core)
            core.close()
            plain, keyed = _cove(home, "record", "verify"), _cove(home, "record", "verify", "--key", str(key))
            print(f"| {kind} | exit {plain.returncode}: {_said(plain)} | exit {keyed.returncode}: {_said(keyed)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
