"""bench/cpu_share.py against the real engine on the tiny generated model: the blocks it
burns and the gaps it splits are the ones it says."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
sys.path.insert(0, str(ROOT / "bench"))

import cpu_share  # noqa: E402
from app.engine.client import EngineClient  # noqa: E402


def test_every_other_block_is_burned_and_its_gaps_kept_apart(tiny_gguf: Path) -> None:
    with EngineClient() as engine:
        engine.load(tiny_gguf, n_threads=1)
        started = time.thread_time()
        plain, burned = cpu_share.burned_gaps(engine, 0.002, 48, 4)
        spent = time.thread_time() - started
    # A few of the tiny model's byte tokens arrive together (a character split over tokens),
    # so there are up to 48 pieces: all gaps but the first block's and after the last piece.
    assert 30 <= len(plain) + len(burned) <= 48 - 4 - 1
    assert abs(len(plain) - len(burned)) <= 4  # every other block
    assert all(gap > 0 for gap in plain + burned)
    assert spent >= 0.002 * len(burned)  # each burned gap came after 2 ms of spinning


def test_the_script_prints_a_ratio_per_burn(tiny_gguf: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "cpu_share.py"),
            "--model",
            str(tiny_gguf),
            "--burn",
            "0.5,1",
            "--tokens",
            "40",
            "--replies",
            "1",
            "--block",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("burn ")]
    assert [line.split(":")[0] for line in lines] == ["burn 0.50 ms/token", "burn 1.00 ms/token"]
    assert all("tg ratio" in line for line in lines)
