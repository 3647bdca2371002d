"""bench/ui_stream.py, the UI stall and produced-to-visible figures, runs end to end: every
streamed reply completes with all its tokens and both figures are measured (no wall-clock
threshold). It once reported 'the engine has been shut down' for every reply unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(400)


def test_every_streamed_reply_completes_and_is_measured() -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "ui_stream.py"), "--tokens", "60", "--json"],
        capture_output=True,
        text=True,
        timeout=360,
        cwd=REPO_ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rates = json.loads(out.stdout)["rates"]
    assert rates
    for r in rates:
        assert (r["status"], r["error"], r["tokens"]) == ("complete", None, 60), r
        assert r["latency_ms"]["n"] > 0 and r["stall_ms"]["p99"] is not None
