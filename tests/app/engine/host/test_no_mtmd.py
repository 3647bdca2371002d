"""A build of llama.cpp without its multimodal library (libmtmd) still runs text models in the host;
a load that names a projector fails with a sentence instead. The library is taken away the way
llama-cpp-python allows, MTMD_CPP_LIB naming a file that is not there, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.tiny_vision import write_tiny_vision

pytestmark = pytest.mark.timeout(120)

SCRIPT = """
import sys
from app.engine.host.session import LoadError, ModelSession
from app.engine.protocol import Load
text, mmproj = sys.argv[1], sys.argv[2]
session = ModelSession(Load("a", text, n_ctx=256, n_threads=1))
print("text:", session.images is None)
session.close()
try:
    ModelSession(Load("b", text, n_ctx=256, n_threads=1, mmproj_path=mmproj))
except LoadError as exc:
    print("refused:", exc)
"""


def test_text_models_run_and_a_projector_is_refused_with_a_sentence(tmp_path: Path) -> None:
    text, mmproj = write_tiny_vision(tmp_path)
    env = {**os.environ, "MTMD_CPP_LIB": str(tmp_path / "no-libmtmd.so"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(text), str(mmproj)], capture_output=True, text=True, timeout=100, env=env, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "text: True" in done.stdout
    assert "refused: this build of llama.cpp has no multimodal library (libmtmd:" in done.stdout
    assert "so no projector can be opened" in done.stdout
